import csv, sys
CH=32<<20
def r2(s): return (s+(2<<20)-1)//(2<<20)*(2<<20)
def merge(h):
    h.sort(); m=[]
    for x in h:
        if m and m[-1][0]+m[-1][1]==x[0]: m[-1]=(m[-1][0],m[-1][1]+x[1])
        else: m.append(x)
    return m
def carve(holes,a,size):
    for i,(b,l) in enumerate(holes):
        if b<=a and a+size<=b+l:
            holes.pop(i)
            if a>b: holes.append((b,a-b))
            if a+size<b+l: holes.append((a+size,b+l-a-size))
            holes.sort(); return True
    return False
class VA:
    def __init__(s, top, order):
        s.va=[(0, top)]; s.chunks={}; s.live={}; s.seq=0; s.order=order
    def predict(s,size):
        size=r2(size)
        keys=sorted(s.chunks, key=(lambda b:-s.chunks[b][3]) if s.order=='recent' else (lambda b:b))
        for base in keys:
            for (a,l) in s.chunks[base][1]:
                if l>=size: return a
        n=(size+CH-1)//CH*CH
        for a,l in reversed(s.va):
            if l>=n: return a+l-n
        return None
    def place(s,a,size):
        size=r2(size)
        for base,c in s.chunks.items():
            if carve(c[1],a,size):
                c[2]+=1; s.live[a]=(size,base); return
        n=(size+CH-1)//CH*CH
        if a%CH==0 and carve(s.va,a,n):
            s.seq+=1; s.chunks[a]=[n,[(a+size,n-size)] if n>size else [],1,s.seq]; s.live[a]=(size,a); return
        s.live[a]=(size,None)  # external (pre-existing region)
    def free(s,a):
        size,base=s.live.pop(a)
        if base is None: return
        c=s.chunks[base]; c[1]=merge(c[1]+[(a,size)]); c[2]-=1
        if c[2]==0:
            del s.chunks[base]; s.va=merge(s.va+[(base,c[0])])
rows=list(csv.DictReader(open(sys.argv[1])))
order=sys.argv[2]
top=0x7f574a000000
m=VA(top,order); ok=tot=0
for r in rows:
    s=int(r['size']); a=int(r['addr'])
    if s<(2<<20) or r['op'] not in('malloc','free'): continue
    if r['op']=='malloc':
        p=m.predict(s); tot+=1; ok+=(p==a)
        if p!=a and len(sys.argv)>3: print('step',r['step'],r['tag'],s>>20,'meas',hex(a),'pred',hex(p) if p else None)
        m.place(a,s)
    elif a in m.live: m.free(a)
print(order, ok,'/',tot,'one-step exact')
