// The scale policy's two paths, the checkpoint format and the overflow report.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>

#include "ampkit/errors.h"
#include "ampkit/overflow_report.h"
#include "ampkit/scale_policy.h"
#include "ampkit/scaler_checkpoint.h"

namespace {

ampkit::DeviceState fresh_state(float scale, int hysteresis) {
  return {at::full({}, scale, at::kFloat), at::zeros({}, at::kInt),
          at::full({}, hysteresis, at::kInt), at::zeros({3}, at::kLong)};
}

// With factors that are powers of two both roundings are exact, so the host arithmetic and the
// ATen-op path must agree bit for bit on any overflow sequence.
TEST(ScalePolicy, HostAndDevicePathsAgree) {
  ampkit::ScalePolicy policy;
  policy.min_scale = 4.0;
  policy.max_scale = 4096.0;
  policy.hysteresis = 3;
  policy.consecutive_hysteresis = true;
  const ampkit::GrowthRule rule{2.0, 0.5, 3};
  auto host = fresh_state(256.f, 3);
  auto device = fresh_state(256.f, 3);
  std::mt19937 random(7);
  for (int i = 0; i < 200; ++i) {
    const at::Tensor found = at::full({}, random() % 3 == 0 ? 1.f : 0.f);
    const auto a = ampkit::apply_update(host, found, rule, policy, /*tensor_ops=*/false);
    const auto b = ampkit::apply_update(device, found, rule, policy, /*tensor_ops=*/true);
    ASSERT_TRUE(a.on_host.has_value());
    ASSERT_FALSE(b.on_host.has_value());
    EXPECT_EQ(*a.on_host, b.on_device.item<bool>()) << "step " << i;
    EXPECT_TRUE(at::equal(host.scale, device.scale)) << "step " << i;
    EXPECT_TRUE(at::equal(host.growth_tracker, device.growth_tracker)) << "step " << i;
    EXPECT_TRUE(at::equal(host.hysteresis_left, device.hysteresis_left)) << "step " << i;
    EXPECT_TRUE(at::equal(host.counters, device.counters)) << "step " << i;
  }
  EXPECT_GE(host.scale.item<float>(), 4.f);
  EXPECT_LE(host.scale.item<float>(), 4096.f);
}

TEST(ScalePolicy, AnOverflowAtTheFloorIsACollapseAndTheFloorHolds) {
  ampkit::ScalePolicy policy;
  policy.min_scale = 2.0;
  auto state = fresh_state(4.f, 1);
  const at::Tensor inf = at::ones({});
  EXPECT_FALSE(*ampkit::apply_update(state, inf, {2.0, 0.5, 10}, policy).on_host);  // 4 -> 2
  EXPECT_EQ(state.scale.item<float>(), 2.f);
  EXPECT_TRUE(*ampkit::apply_update(state, inf, {2.0, 0.5, 10}, policy).on_host);  // at 2
  EXPECT_EQ(state.scale.item<float>(), 2.f);
  EXPECT_EQ(state.counters[1].item<int64_t>(), 2);  // skipped
  EXPECT_EQ(state.counters[2].item<int64_t>(), 2);  // consecutive
}

TEST(Checkpoint, TorchAmpKeysComeFirstAndAStateWithoutAmpkitKeysKeepsThePolicy) {
  ampkit::ScalerState current{1024, 2, 0.5, 100, 7};
  current.policy.hysteresis = 3;
  current.steps = 9;
  const auto dict = ampkit::to_state_dict(current);
  ASSERT_EQ(dict.size(), ampkit::kStateKeys.size() + ampkit::kPolicyKeys.size());
  for (size_t i = 0; i < ampkit::kStateKeys.size(); ++i)
    EXPECT_EQ(dict[i].first, ampkit::kStateKeys[i]);
  std::map<std::string, ampkit::StateValue> torch_amp{{"scale", 8.0},
                                                      {"growth_factor", 4.0},
                                                      {"backoff_factor", 0.25},
                                                      {"growth_interval", int64_t{5}},
                                                      {"_growth_tracker", int64_t{2}}};
  const auto loaded = ampkit::from_state_dict(torch_amp, current);
  EXPECT_EQ(loaded.scale, 8.0);
  EXPECT_EQ(loaded.policy.hysteresis, 3);  // the scaler's own
  EXPECT_EQ(loaded.hysteresis_left, 3);    // restarted
  EXPECT_EQ(loaded.steps, 0);
  torch_amp["min_scal"] = 1.0;
  EXPECT_THROW(ampkit::from_state_dict(torch_amp, current), ampkit::ArgumentError);
  torch_amp.erase("min_scal");
  torch_amp["min_scale"] = std::string("1");
  EXPECT_THROW(ampkit::from_state_dict(torch_amp, current), ampkit::ArgumentTypeError);
}

TEST(OverflowReport, NamesTheParametersAndCountsInfAndNan) {
  auto a = at::zeros({4}).set_requires_grad(true);
  auto b = at::zeros({3}).set_requires_grad(true);
  auto c = at::zeros({2}).set_requires_grad(true);  // no gradient: not looked at
  a.mutable_grad() = at::tensor({1.f, INFINITY, -INFINITY, NAN});
  b.mutable_grad() = at::ones({3});
  ampkit::ParamList params({a, b, c}, {"enc.weight", "enc.bias", "head.weight"});
  const auto report = ampkit::find_overflow(params);
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].name, "enc.weight");
  EXPECT_EQ(report[0].inf, 2);
  EXPECT_EQ(report[0].nan, 1);
}

}  // namespace
