// The grad-scaler state machine, walked step by step, every intermediate state asserted.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ampkit/errors.h"
#include "ampkit/grad_scaler.h"
#include "device_test.h"

using ampkit::GradScaler;
using ampkit::OptimizerStage;
using ampkit::ParamList;
using ampkit::ScalerSettings;
using ampkit::SettingValue;

namespace {

ScalerSettings options(double init, double growth, double backoff, int64_t interval) {
  ScalerSettings o;
  o.init_scale = init;
  o.growth_factor = growth;
  o.backoff_factor = backoff;
  o.growth_interval = interval;
  return o;
}

at::Tensor param_with_grad(std::vector<float> grad, c10::DeviceType device = at::kCPU) {
  const auto on = at::TensorOptions().device(device);
  auto p = at::zeros({static_cast<int64_t>(grad.size())}, on).set_requires_grad(true);
  p.mutable_grad() = at::tensor(grad, on);
  return p;
}

// The scaler on each device type (cpu; cuda where there is one).
struct OnDevice : ampkit_test::DeviceTest {};
AMPKIT_DEVICE_TEST_SUITE(OnDevice);

struct Walk : ::testing::TestWithParam<std::tuple<int, double, double>> {};

// Reference rule from the header, in doubles; float32 rounding is exact for these powers of two.
TEST_P(Walk, ScaleAndTrackerFollowTheUpdateRule) {
  const auto [interval, growth, backoff] = GetParam();
  GradScaler scaler("cpu", options(1024.0, growth, backoff, interval));
  auto p = param_with_grad({1.f, 2.f});
  ParamList params({p});
  double scale = 1024.0;
  int tracker = 0;
  const std::vector<bool> inf_on = {false, false, true, false, false, false, true, true, false};
  for (bool inf : inf_on) {
    scaler.scale(at::ones({}));
    p.mutable_grad() = inf ? at::tensor({1.f, INFINITY}) : at::tensor({1.f, 2.f});
    EXPECT_EQ(scaler.may_step(params), !inf);
    EXPECT_EQ(scaler.stage(params), OptimizerStage::Unscaled);
    scaler.mark_stepped(params);
    EXPECT_EQ(scaler.stage(params), OptimizerStage::Stepped);
    scaler.update();
    EXPECT_FALSE(scaler.stage(params).has_value());
    if (inf) {
      scale *= backoff;
      tracker = 0;
    } else if (++tracker == interval) {
      scale *= growth;
      tracker = 0;
    }
    EXPECT_FLOAT_EQ(scaler.get_scale(), static_cast<float>(scale));
    EXPECT_EQ(scaler.state_dict().counters.growth_tracker, tracker);
  }
}

INSTANTIATE_TEST_SUITE_P(Settings, Walk,
                         ::testing::Values(std::make_tuple(1, 2.0, 0.5),
                                           std::make_tuple(2, 2.0, 0.5),
                                           std::make_tuple(3, 4.0, 0.25),
                                           std::make_tuple(2000, 2.0, 0.5)));

TEST_P(OnDevice, UnscaleDividesAndSkipsMissingGradients) {
  GradScaler scaler(device(), options(4.0, 2.0, 0.5, 10));
  auto with_grad = param_with_grad({8.f, -4.f}, device_type());
  auto without_grad = at::zeros({3}, on_device()).set_requires_grad(true);
  ParamList params({with_grad, without_grad});
  scaler.scale(at::ones({}, on_device()));
  scaler.unscale_(params);
  EXPECT_TRUE(at::equal(with_grad.grad().cpu(), at::tensor({2.f, -1.f})));
  EXPECT_FALSE(without_grad.grad().defined());
}

TEST_P(OnDevice, MisuseErrorsLeaveStateAlone) {
  GradScaler scaler(device(), ScalerSettings{});
  ParamList params({param_with_grad({1.f}, device_type())});
  EXPECT_THROW(scaler.unscale_(params), ampkit::StateError);  // before scale()
  EXPECT_THROW(scaler.update(), ampkit::StateError);
  scaler.scale(at::ones({}, on_device()));
  EXPECT_THROW(scaler.update(), ampkit::StateError);  // no inf checks recorded
  scaler.unscale_(params);
  EXPECT_THROW(scaler.unscale_(params), ampkit::StateError);  // twice
  EXPECT_TRUE(scaler.may_step(params));
  scaler.mark_stepped(params);
  EXPECT_THROW(scaler.may_step(params), ampkit::StateError);  // step twice
  EXPECT_THROW(scaler.unscale_(params), ampkit::StateError);  // after step
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

TEST_P(OnDevice, HalfGradientsAreRejectedBeforeAnyIsTouched) {
  GradScaler scaler(device(), options(2.0, 2.0, 0.5, 10));
  auto ok = param_with_grad({4.f}, device_type());
  auto half = at::zeros({1}, on_device()).set_requires_grad(true);
  half.mutable_grad() = at::ones({1}, on_device().dtype(at::kHalf));
  ParamList params({ok, half});
  scaler.scale(at::ones({}, on_device()));
  EXPECT_THROW(scaler.unscale_(params), ampkit::ArgumentError);
  EXPECT_TRUE(at::equal(ok.grad().cpu(), at::tensor({4.f})));
}

TEST_P(OnDevice, OneHostReadPerStep) {
  GradScaler scaler(device(), ScalerSettings{});
  ParamList params({param_with_grad({1.f}, device_type()), param_with_grad({2.f}, device_type())});
  for (int i = 0; i < 5; ++i) {
    scaler.scale(at::ones({}, on_device()));
    scaler.may_step(params);
    scaler.mark_stepped(params);
    scaler.update();
  }
  EXPECT_EQ(scaler.host_reads(), 5);
}

TEST(GradScaler, OptionsAreValidatedWithTheArgumentsName) {
  // Settings built in C++ are judged by the table's rows, as options given by name are.
  auto message = [](ScalerSettings o) {
    try {
      GradScaler("cpu", o);
    } catch (const ampkit::ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(options(1, 0.5, 0.5, 1)),
            "`growth_factor` must be a finite number > 1, got 0.5.");
  EXPECT_EQ(message(options(1, 2, 1.0, 1)), "`backoff_factor` must be in (0, 1), got 1.");
  EXPECT_EQ(message(options(NAN, 2, 0.5, 1)), "`init_scale` must be a finite number > 0, got nan.");
  EXPECT_EQ(message(options(-1, 2, 0.5, 1)), "`init_scale` must be a finite number > 0, got -1.");
  EXPECT_THROW(GradScaler("nodevice", ScalerSettings{}), ampkit::ArgumentError);
  // By name, as Python and R give them: a count is judged before it is made whole.
  auto by_name = [](const char* name, SettingValue value) {
    try {
      ampkit::settings_from_options({{name, value}});
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(by_name("growth_interval", 1.5),
            "`growth_interval` must be a whole number >= 1, got 1.5.");
  EXPECT_EQ(by_name("hysteresis", std::string("2")), "`hysteresis` must be a number, got str.");
  EXPECT_EQ(by_name("growth_fctor", 2.0), "GradScaler has no option `growth_fctor`.");
}

TEST_P(OnDevice, StateDictRoundTripAndAtomicLoad) {
  GradScaler a(device(), options(256.0, 3.0, 0.25, 7));
  a.scale(at::ones({}, on_device()));
  const auto state = a.state_dict();
  EXPECT_EQ(state.counters.scale, 256.0);
  EXPECT_EQ(state.settings.growth_interval, 7);
  GradScaler b(device(), ScalerSettings{});
  b.load_state_dict(state);
  EXPECT_EQ(b.get_scale(), 256.0);
  EXPECT_EQ(b.growth_factor(), 3.0);
  auto bad = state;
  bad.counters.growth_tracker = -1;  // below -growth_delay
  EXPECT_THROW(b.load_state_dict(bad), ampkit::ArgumentError);
  EXPECT_EQ(b.growth_factor(), 3.0);
}

TEST(GradScaler, DisabledScalerIsANoOp) {
  ScalerSettings o;
  o.enabled = false;
  GradScaler scaler("cpu", o);
  auto loss = at::ones({});
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  ParamList params({param_with_grad({INFINITY})});
  EXPECT_TRUE(scaler.may_step(params));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0);
}

TEST(GradScaler, CudaWithoutCudaIsDisabledWithAWarning) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present";
  GradScaler scaler("cuda", ScalerSettings{});
  EXPECT_FALSE(scaler.is_enabled());
  EXPECT_NE(scaler.warning().find("CUDA is not available"), std::string::npos);
}

}  // namespace
