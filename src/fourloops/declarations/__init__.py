"""The workflow's stage declarations: one module per stage, its `STAGE` (fourloops.stage.Stage)."""
