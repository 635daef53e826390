"""The application: the ``forecaster`` command (click), its options generated from the config
dataclasses, experiment files, and the pipeline that runs an experiment end to end."""
