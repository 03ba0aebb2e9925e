"""The hardware seam of ``dsctl health``: NVML adapter (the only pynvml importer), strict fake NVML module, sysfs."""
