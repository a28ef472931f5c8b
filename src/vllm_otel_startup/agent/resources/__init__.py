"""Resource readings: the sampler thread (process, tree, host, cgroup) and NVML for the GPUs."""
