"""OpenCL C sources of mdhom: md_hom skeleton templates and combine operators (package data)."""
