from binlake.cli import main

raise SystemExit(main())
