"""``python -m fedbandit_env.bench`` is the ``fedbandit`` command line."""

from fedbandit_env.bench.cli import main

if __name__ == "__main__":
    main()
