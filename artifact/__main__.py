from artifact.cli import main

raise SystemExit(main())
