"""`python -m orchestrator`: the same command as `orchestrator`."""

from orchestrator.cli import main

raise SystemExit(main())
