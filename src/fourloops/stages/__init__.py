"""The workflow's stages: one module each, holding the stage's function(s) and its `STAGE` declaration
(fourloops.stage.Stage). Importing a stage module is cheap (models are imported inside the functions):
the workflow reads every declaration at parse time."""
