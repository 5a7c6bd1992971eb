/*
 * main.c - the allocsim command (placeholder until the CLI lands).
 */
#include <stdio.h>

int main(void)
{
    fputs("allocsim: not built yet\n", stderr);
    return 2;
}
