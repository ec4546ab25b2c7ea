from binlake.jobs.cli import main

raise SystemExit(main())
