"""3FS storage: cluster sizing (``sizing``) and chain-table generation and checks (``design``, ``layout``,
``balance``, ``chaintable``, ``api``). Pure logic; the command layer reads and writes files."""
