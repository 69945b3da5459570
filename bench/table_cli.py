"""terngrad-bench: the command line the bench/*_table.py scripts share: one argument, and a missing or malformed
input is one line on stderr and exit 2, not a traceback."""
import sys

READ_ERRORS = (FileNotFoundError, IsADirectoryError, PermissionError, ValueError, KeyError, IndexError, TypeError)


def run(main, script, argument):
    """main(sys.argv[1]); script names the program in messages, argument what its one argument is."""
    if len(sys.argv) != 2:
        print(f"usage: python3 bench/{script}.py <{argument}>", file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1])
    except READ_ERRORS as e:
        print(f"{script}: {sys.argv[1]}: not a readable {argument} ({type(e).__name__}: {e})", file=sys.stderr)
        sys.exit(2)
