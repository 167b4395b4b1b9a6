"""The tuned-config files' schema and its check: what :mod:`mdhom.configs` accepts on reading and
:mod:`mdhom.config_store` writes.

A check that fails names the offending entry, so a hand-edited or truncated file is reported where it is wrong;
the reader then skips the file with one warning instead of raising.

Schema (``schema_version`` 1) of a device file::

    {
      "schema": "mdhom-tuned-configs", "schema_version": 1,
      "device": {"key", "name", "platform", "vendor", "type", "driver_version", "opencl_version",
                 "compute_units", "max_work_group_size", "local_mem_size"},
      "kernels": {
        "<kernel>": {
          "description_hash": "sha256 ...",        # files written before 2026-11-28: one hash for every class
          "classes": {
            "<size class>": {
              "description_hash": "sha256 of the generated OpenCL source and parameter names",
              "sizes": {"<dim>": int, ...},        # the problem size the class was tuned at
              "config": {"NUM_WG_<dim>": int, ...}, # the best configuration found
              "median_s": float,                    # its median kernel time (OpenCL profiling events)
              "default_config": {...}, "default_s": float,   # the heuristic default, timed the same way
              "heuristic": true,                    # optional: the tune kept the heuristic (mdhom.configs)
              "trials": int, "failed_trials": int, # trials run in the study; of which failed or rejected
              "date": "ISO 8601 UTC",
              "versions": {"mdhom", "pyopencl", "optuna", "driver"}
            }
          }
        }
      }
    }
"""

from __future__ import annotations

from typing import Any

SCHEMA = "mdhom-tuned-configs"
DEFAULTS_SCHEMA = "mdhom-tuned-defaults"
SCHEMA_VERSION = 1


class SchemaError(ValueError):
    """A tuned-config file that does not follow the schema: the message names the offending entry."""


def _check_config_dict(where: str, cfg: Any) -> None:
    if not isinstance(cfg, dict) or not cfg:
        raise SchemaError(f"{where}: must be a non-empty object of parameter -> integer")
    for k, v in cfg.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise SchemaError(f"{where}: {k!r}={v!r} must be a non-negative integer")
        if v < 1 and k.startswith("NUM_"):  # work-group and work-item counts; switches such as PARTIALS_LOCAL may be 0
            raise SchemaError(f"{where}: {k!r}={v!r} must be a positive integer")


def _check_kernels(where: str, kernels: Any) -> None:
    if not isinstance(kernels, dict):
        raise SchemaError(f"{where}: 'kernels' must be an object")
    for name, entry in kernels.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("classes"), dict):
            raise SchemaError(f"{where}: kernel {name!r} needs a 'classes' object")
        for cls, e in entry["classes"].items():
            at = f"{where}: {name}/{cls}"
            if not isinstance(e, dict):
                raise SchemaError(f"{at}: must be an object")
            sizes = e.get("sizes")
            if not isinstance(sizes, dict) or not sizes or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in sizes.values()
            ):
                raise SchemaError(f"{at}: 'sizes' must map dimensions to positive integers")
            _check_config_dict(f"{at} config", e.get("config"))
            for t in ("median_s", "default_s"):
                if t in e and e[t] is not None and not (isinstance(e[t], int | float) and e[t] >= 0):
                    raise SchemaError(f"{at}: {t!r} must be a non-negative number")
            if "heuristic" in e and not isinstance(e["heuristic"], bool):
                raise SchemaError(f"{at}: 'heuristic' must be true or false")


def validate(doc: Any, where: str = "tuned configs") -> dict:
    """Check a loaded document against the schema (device file or defaults file); return it or raise
    :class:`SchemaError`."""
    if not isinstance(doc, dict):
        raise SchemaError(f"{where}: not a JSON object")
    schema = doc.get("schema")
    if schema not in (SCHEMA, DEFAULTS_SCHEMA):
        raise SchemaError(f"{where}: schema {schema!r} is not {SCHEMA!r}: not an mdhom tuned-config file")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise SchemaError(
            f"{where}: schema_version {doc.get('schema_version')!r}, this mdhom reads version {SCHEMA_VERSION}"
        )
    if schema == SCHEMA:
        if not isinstance(doc.get("device"), dict) or not isinstance(doc["device"].get("key"), str):
            raise SchemaError(f"{where}: 'device' must be an object with a 'key'")
        _check_kernels(where, doc.get("kernels"))
    else:
        groups = doc.get("groups")
        if not isinstance(groups, dict):
            raise SchemaError(f"{where}: 'groups' must be an object")
        for g, body in groups.items():
            if not isinstance(body, dict):
                raise SchemaError(f"{where}: group {g!r} must be an object")
            _check_kernels(f"{where} group {g}", body.get("kernels"))
    return doc


__all__ = ["DEFAULTS_SCHEMA", "SCHEMA", "SCHEMA_VERSION", "SchemaError", "validate"]
