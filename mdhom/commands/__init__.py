"""Sub-commands of the ``mdhom`` command line, one module each (see ``mdhom.cli``)."""
