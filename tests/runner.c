/*
 * runner.c - the CUnit test runner. Suites come from build/suites.h, generated from the
 * tests/test_*.c files. The last line is "N passed, N failed"; the exit status is 1 on
 * any failed test or suite.
 *   run-tests [-q] [SUITE...]    every suite, or only those named (make tsan picks some)
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    if (CU_register_suites(suites) != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    int quiet = argc > 1 && strcmp(argv[1], "-q") == 0, first = 1 + quiet;
    CU_basic_set_mode(quiet ? CU_BRM_SILENT : CU_BRM_VERBOSE);
    for (CU_pSuite su = CU_get_registry()->pSuite; first < argc && su; su = su->pNext) {
        int named = 0;
        for (int i = first; i < argc; i++)
            named |= strcmp(argv[i], su->pName) == 0;
        CU_set_suite_active(su, named ? CU_TRUE : CU_FALSE);
    }
    CU_set_fail_on_inactive(CU_FALSE); /* suites left out are not failures */
    for (int i = first; i < argc; i++) {
        if (!CU_get_suite(argv[i])) {
            fprintf(stderr, "run-tests: no suite '%s'\n", argv[i]);
            CU_cleanup_registry();
            return 2;
        }
    }
    CU_ErrorCode rc = CU_basic_run_tests();
    unsigned run = CU_get_number_of_tests_run();
    unsigned failed = CU_get_number_of_tests_failed();
    unsigned suites_failed = CU_get_number_of_suites_failed();
    CU_cleanup_registry(); /* wipes the counts: they were read above */
    printf("\n%u passed, %u failed\n", run - failed, failed + suites_failed);
    return (rc != CUE_SUCCESS || failed || suites_failed) ? 1 : 0;
}
