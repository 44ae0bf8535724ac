"""The driver: one Hydra job (job.py) runs the stages of a cell; what a sweep would launch
(plan), what a cell reads from outside (assets), the command line's key check (overrides),
the after-sweep report (callbacks) and `taskaware doctor`."""
