"""`python -m minigrad info` — build facts. (train/sample subcommands: see minigrad/cli.py)"""
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["info"]:
        import minigrad

        for key, value in minigrad.build_info().items():
            print(f"{key:>14}: {value}")
        return 0
    print("usage: python -m minigrad info", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
