# onstart: the walls, then (a real run) the preflight; only then is the working directory marked with its
# model set (a refused run writes nothing), and the last good outputs of the stages that keep them are
# stashed. onsuccess / onerror: a job that failed gets its last good outputs back (fourloops.keep).


onstart:
    FOURLOOPS.before_first_job(workflow.dag)


onsuccess:
    FOURLOOPS.settle_last_good()


onerror:
    FOURLOOPS.settle_last_good()
