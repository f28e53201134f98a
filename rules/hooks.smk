# Before the first job (onstart): the walls, then (a real run) the preflight; only then is the working
# directory marked with its model set. A refused run writes nothing.


onstart:
    FOURLOOPS.before_first_job(workflow.dag)
