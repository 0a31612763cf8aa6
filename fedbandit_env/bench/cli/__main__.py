"""``python -m fedbandit_env.bench.cli`` is the ``fedbandit`` command line (as ``python -m
fedbandit_env.bench``)."""

from fedbandit_env.bench.cli import main

if __name__ == "__main__":
    main()
