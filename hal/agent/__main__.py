"""`python -m hal.agent --hal URL --token-file F [--enrol-token T] [--root DIR] [--interval N]`."""

from hal.agent.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
