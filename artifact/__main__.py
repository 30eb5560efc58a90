from artifact.entry import main

raise SystemExit(main())
