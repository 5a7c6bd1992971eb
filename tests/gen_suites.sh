#!/bin/sh
# Emits the CUnit suite table: one entry per `CU_TestInfo test_NAME[]` in the given files.
names=$(sed -n 's/^CU_TestInfo[[:space:]]\{1,\}\(test_[A-Za-z0-9_]*\)[[:space:]]*\[\].*/\1/p' "$@")
for n in $names; do echo "extern CU_TestInfo $n[];"; done
echo "static CU_SuiteInfo suites[] = {"
for n in $names; do echo "    { .pName = \"${n#test_}\", .pTests = $n },"; done
echo "    CU_SUITE_INFO_NULL,"
echo "};"
