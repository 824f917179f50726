"""The domain: rules about what may happen to a task, with no store, no HTTP and no clock.

`lifecycle.py` is the task state machine (which moves an agent's update may make, which started
tasks end Lost when their agent runs no worker); `rendezvous.py` says when a worker may start and
where its run's workers meet. `coordinator/reports.py` applies these rules; the store writes what
they decide.
"""
