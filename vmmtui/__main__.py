from vmmtui.cli import main

raise SystemExit(main())
