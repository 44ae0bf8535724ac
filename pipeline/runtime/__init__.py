"""What a run meets on its machine: errors a user can act on, devices, the hub (offline
probe, resolved revisions), keys kept off disk, stop signals, progress lines, install
extras, and where the package's own files are."""
