"""The code a stage's jobs run: one module per stage, its functions (the scripts call them), and the code in
their lineage. Each stage's declaration, of the same name in fourloops.declarations, names its module here."""
