"""What every learner shares, whatever its model: input validation, binning, losses, the option table and model
files. The device side they share lives in :mod:`mdhom.device`; a learner package (``trees``) is a driver."""
