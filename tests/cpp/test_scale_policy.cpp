// The scale policy's two paths, the checkpoint format and the overflow report.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>

#include "ampkit/errors.h"
#include "ampkit/overflow_report.h"
#include "ampkit/scale_policy.h"
#include "ampkit/scaler_checkpoint.h"
#include "device_test.h"

namespace {

ampkit::DeviceState fresh_state(float scale, int hysteresis, c10::DeviceType device = at::kCPU) {
  const auto on = at::TensorOptions().device(device);
  return {at::full({}, scale, on.dtype(at::kFloat)), at::zeros({}, on.dtype(at::kInt)),
          at::tensor(std::vector<int64_t>{hysteresis, 0, 0, 0}, on.dtype(at::kLong))};
}

// The rule on each device type: host arithmetic for a CPU state, ATen ops on CUDA.
struct RuleOnDevice : ampkit_test::DeviceTest {
  // Whether the update was a collapse, read to the host whichever path took it.
  bool collapsed(ampkit::DeviceState& state, bool overflow, const ampkit::ScalerSettings& s) {
    const auto c = ampkit::apply_update(state, at::full({}, overflow ? 1.f : 0.f, on_device()), s);
    if (c.on_host) return *c.on_host;
    return c.on_device.defined() && c.on_device.item<bool>();  // no flag without a floor
  }
};
AMPKIT_DEVICE_TEST_SUITE(RuleOnDevice);

// With factors that are powers of two both roundings are exact, so the host arithmetic and the
// ATen-op path must agree bit for bit on any overflow sequence: with the whole policy on, with
// hysteresis alone, and at torch.amp's settings (its kernel moves the scale; the counters and
// hysteresis move by the rule's maps, chosen on the device).
void expect_paths_agree(const ampkit::ScalerSettings& settings, unsigned seed) {
  auto host = fresh_state(256.f, static_cast<int>(settings.hysteresis));
  auto device = fresh_state(256.f, static_cast<int>(settings.hysteresis));
  std::mt19937 random(seed);
  int overflows = 0;
  for (int i = 0; i < 200; ++i) {
    const bool overflow = random() % 3 == 0;
    overflows += overflow;
    const at::Tensor found = at::full({}, overflow ? 1.f : 0.f);
    const auto a = ampkit::apply_update(host, found, settings, /*tensor_ops=*/false);
    const auto b = ampkit::apply_update(device, found, settings, /*tensor_ops=*/true);
    ASSERT_TRUE(a.on_host.has_value());
    ASSERT_FALSE(b.on_host.has_value());
    ASSERT_EQ(b.on_device.defined(), settings.min_scale.has_value());
    if (settings.min_scale) EXPECT_EQ(*a.on_host, b.on_device.item<bool>()) << "step " << i;
    EXPECT_TRUE(at::equal(host.scale, device.scale)) << "step " << i;
    EXPECT_TRUE(at::equal(host.growth_tracker, device.growth_tracker)) << "step " << i;
    EXPECT_TRUE(at::equal(host.counters, device.counters)) << "step " << i;
  }
  EXPECT_EQ(host.counters[ampkit::kSteps].item<int64_t>(), 200);
  EXPECT_EQ(host.counters[ampkit::kSkipped].item<int64_t>(), overflows);
}

TEST(ScalePolicy, HostAndDevicePathsAgree) {
  ampkit::ScalerSettings policy;
  policy.growth_interval = 3;
  policy.min_scale = 4.0;
  policy.max_scale = 4096.0;
  policy.hysteresis = 3;
  policy.consecutive_hysteresis = true;
  policy.growth_delay = 1;
  expect_paths_agree(policy, 7);

  ampkit::ScalerSettings hysteresis;
  hysteresis.growth_interval = 2;
  hysteresis.hysteresis = 2;
  expect_paths_agree(hysteresis, 11);

  ampkit::ScalerSettings torch_amp;
  torch_amp.growth_interval = 2;
  ASSERT_TRUE(torch_amp.is_torch_amp_rule());
  expect_paths_agree(torch_amp, 13);
}

TEST_P(RuleOnDevice, ABackOffDueAtTheFloorIsACollapseAndTheFloorHolds) {
  ampkit::ScalerSettings settings;
  settings.growth_interval = 10;
  settings.min_scale = 2.0;
  auto state = fresh_state(4.f, 1, device_type());
  EXPECT_FALSE(collapsed(state, true, settings));  // 4 -> 2
  EXPECT_EQ(state.scale.item<float>(), 2.f);
  EXPECT_TRUE(collapsed(state, true, settings));  // at 2
  EXPECT_EQ(state.scale.item<float>(), 2.f);
  EXPECT_EQ(state.counters[ampkit::kSkipped].item<int64_t>(), 2);
  EXPECT_EQ(state.counters[ampkit::kConsecutive].item<int64_t>(), 2);
}

// DeepSpeed's rule: an overflow that hysteresis absorbs is no collapse, even at the floor.
TEST_P(RuleOnDevice, AnOverflowHysteresisAbsorbsIsNoCollapse) {
  ampkit::ScalerSettings settings;
  settings.min_scale = 1.0;
  settings.hysteresis = 2;
  auto state = fresh_state(1.f, 2, device_type());
  EXPECT_FALSE(collapsed(state, true, settings));  // absorbed
  EXPECT_TRUE(collapsed(state, true, settings));   // back-off due at 1
  EXPECT_TRUE(collapsed(state, true, settings));
}

// growth_delay: the tracker restarts at -delay after an overflow, so the first growth comes
// growth_interval + delay clean steps later, then every growth_interval.
TEST_P(RuleOnDevice, AGrowthDelayPostponesOnlyTheFirstGrowth) {
  ampkit::ScalerSettings settings;
  settings.growth_interval = 3;
  settings.growth_delay = 1;
  auto state = fresh_state(8.f, 1, device_type());
  state.growth_tracker.fill_(-1);
  std::vector<float> scales;
  for (const bool overflow :
       {false, false, false, false, false, false, false, true, false, false, false, false}) {
    collapsed(state, overflow, settings);
    scales.push_back(state.scale.item<float>());
  }
  const std::vector<float> expected = {8, 8, 8, 16, 16, 16, 32, 16, 16, 16, 16, 32};
  EXPECT_EQ(scales, expected);
}

TEST(Checkpoint, TheKeysComeFromTheTableTorchAmpsFirst) {
  const auto keys = ampkit::state_keys();
  const std::vector<std::string> torch_amp = {"scale", "growth_factor", "backoff_factor",
                                              "growth_interval", "_growth_tracker"};
  ASSERT_GT(keys.size(), torch_amp.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 5), torch_amp);
  EXPECT_EQ(ampkit::torch_amp_state_keys(), torch_amp);
  size_t checkpointed = 0;
  for (const auto& e : ampkit::scaler_table()) checkpointed += e.key != ampkit::Key::None;
  EXPECT_EQ(keys.size(), checkpointed);
}

TEST(Checkpoint, AStateWithoutAmpkitKeysKeepsTheOptionsAndRestartsTheCounters) {
  ampkit::ScalerState current;
  current.settings.hysteresis = 3;
  current.counters.steps = 9;
  current.counters.collapse_warned = true;
  const auto dict = ampkit::to_state_dict(current);
  EXPECT_EQ(dict.size(), ampkit::state_keys().size());
  std::map<std::string, ampkit::SettingValue> torch_amp{{"scale", 8.0},
                                                        {"growth_factor", 4.0},
                                                        {"backoff_factor", 0.25},
                                                        {"growth_interval", int64_t{5}},
                                                        {"_growth_tracker", int64_t{2}}};
  const auto loaded = ampkit::from_state_dict(torch_amp, current);
  EXPECT_EQ(loaded.counters.scale, 8.0);
  EXPECT_EQ(loaded.settings.growth_interval, 5);
  EXPECT_EQ(loaded.settings.hysteresis, 3);       // the scaler's own
  EXPECT_EQ(loaded.counters.hysteresis_left, 3);  // restarted
  EXPECT_EQ(loaded.counters.steps, 0);
  EXPECT_FALSE(loaded.counters.collapse_warned);
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
