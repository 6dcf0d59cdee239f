// Minimal CUDA entry points (the CUDA backend grows from here).
#pragma once

namespace tpc::runtime::cuda {

// Number of visible CUDA devices; 0 when there is no driver or no GPU.
int DeviceCount();
// Fills `n` floats on the device with `value` and copies them to `host_out`.
bool FillOnDevice(float value, int n, float* host_out);

}  // namespace tpc::runtime::cuda
