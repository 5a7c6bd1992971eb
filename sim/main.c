/*
 * main.c - the allocsim program: the command itself is a function (as_cli_main in
 * sim/commands.c), so that tests and the CLI fuzz harness run it in-process.
 */
#include "cli.h"

int main(int argc, char **argv)
{
    return as_cli_main(argc, argv);
}
