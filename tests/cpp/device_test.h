// Device-generic GoogleTest suites, as PyTorch's device-type tests do it: a suite derived from
// DeviceTest runs once per device type (cpu always; cuda instantiated everywhere and skipped with
// "CUDA is not available" where at::hasCUDA() is false). Instantiate it with
// AMPKIT_DEVICE_TEST_SUITE(Suite): the tests are named Devices/Suite.Name/cpu and .../cuda.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

namespace ampkit_test {

inline std::string device_name(c10::DeviceType type) { return type == at::kCUDA ? "cuda" : "cpu"; }

inline std::string device_param_name(const ::testing::TestParamInfo<c10::DeviceType>& info) {
  return device_name(info.param);
}

class DeviceTest : public ::testing::TestWithParam<c10::DeviceType> {
 protected:
  void SetUp() override {
    if (GetParam() == at::kCUDA && !at::hasCUDA()) GTEST_SKIP() << "CUDA is not available";
  }
  c10::DeviceType device_type() const { return GetParam(); }
  // The device type as torch.autocast and ampkit's parsers take it: "cpu", "cuda".
  std::string device() const { return device_name(GetParam()); }
  at::TensorOptions on_device() const { return at::TensorOptions().device(GetParam()); }
  // torch.autocast's default dtype on the device.
  at::ScalarType default_dtype() const {
    return GetParam() == at::kCUDA ? at::kHalf : at::kBFloat16;
  }
};

}  // namespace ampkit_test

#define AMPKIT_DEVICE_TEST_SUITE(Suite)                                            \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::Values(at::kCPU, at::kCUDA), \
                           ampkit_test::device_param_name)
