// ampkit._C: declarations only. Every behaviour lives in core/; this file names it for Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "ampkit/autocast.h"
#include "ampkit/errors.h"
#include "ampkit/grad_scaler.h"

namespace py = pybind11;
using namespace ampkit;

namespace {
// A core warning text, raised as a Python UserWarning (or as an error when warnings are errors).
// Stack level 2: the line that built ampkit.autocast, past its forwarding __init__.
void warn(const std::string& message) {
  if (!message.empty() && PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 2) != 0) {
    throw py::error_already_set();
  }
}
}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ampkit's C++ core: the autocast guard and the grad-scaler state machine.";

  // Each core error is also the built-in type torch.amp raises for the same misuse
  // (see core/include/ampkit/errors.h).
  py::register_exception<ArgumentError>(
      m, "ArgumentError", py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_AssertionError)))
      .attr("__doc__") = "An argument outside its rule; a ValueError (and an AssertionError, which "
                         "torch.amp raises for bad factors).";
  py::register_exception<ArgumentTypeError>(m, "ArgumentTypeError", PyExc_TypeError)
      .attr("__doc__") = "An argument of the wrong type; a TypeError.";
  py::register_exception<StateError>(
      m, "StateError", py::make_tuple(py::handle(PyExc_RuntimeError), py::handle(PyExc_AssertionError)))
      .attr("__doc__") = "A call out of order (unscale_ twice, step twice, update with no inf checks, "
                         "...); a RuntimeError and an AssertionError, as torch.amp raises either.";

  // ---- autocast ----
  py::class_<AutocastRequest>(m, "AutocastRequest", "A resolved autocast request.")
      .def_readonly("dtype", &AutocastRequest::dtype)
      .def_readonly("enabled", &AutocastRequest::enabled)
      .def_readonly("cache_enabled", &AutocastRequest::cache_enabled)
      .def_readonly("warning", &AutocastRequest::warning);
  py::class_<AutocastToken>(m, "AutocastToken", "Proof that an autocast region was entered.")
      .def_property_readonly("active", &AutocastToken::active)
      .def_property_readonly("depth", &AutocastToken::depth);
  // The class behind ampkit.autocast (python/ampkit/autocast.py subclasses it for the decorator
  // and the docs): construction, __enter__ and __exit__ go straight to the core, no Python frame.
  py::class_<AutocastRegion>(m, "AutocastRegion", "A resolved request, entered re-entrantly.")
      .def(py::init([](const std::string& device_type, std::optional<at::ScalarType> dtype,
                       bool enabled, std::optional<bool> cache_enabled) {
             auto region =
                 std::make_unique<AutocastRegion>(device_type, dtype, enabled, cache_enabled);
             warn(region->warning());
             return region;
           }),
           // noconvert: only True/False (pybind11 would otherwise take None, 0.5, nan as flags).
           py::arg("device_type"), py::arg("dtype") = py::none(),
           py::arg("enabled").noconvert() = true, py::arg("cache_enabled").noconvert() = py::none())
      .def("__enter__", [](py::object self) { self.cast<AutocastRegion&>().enter(); return self; })
      .def("__exit__", [](AutocastRegion& self, py::args) { self.exit(); return false; })
      .def("enter", &AutocastRegion::enter)
      .def("exit", &AutocastRegion::exit)
      .def_property_readonly("device", &AutocastRegion::device_type_name)
      .def_property_readonly("fast_dtype", [](const AutocastRegion& self) { return self.request().dtype; })
      .def_property_readonly("enabled", [](const AutocastRegion& self) { return self.request().enabled; })
      .def_property_readonly("cache_enabled", [](const AutocastRegion& self) { return self.request().cache_enabled; })
      .def_property_readonly("request", &AutocastRegion::request)
      .def_property_readonly("open_count", &AutocastRegion::open_count);
  m.def("resolve_autocast", &resolve_autocast, py::arg("device_type"), py::arg("dtype"),
        py::arg("enabled").noconvert(), py::arg("cache_enabled").noconvert(),
        "Resolve a request as torch.autocast.__init__ does; the warning, if any, is returned.");
  m.def("enter_autocast", &enter_autocast, py::arg("request"), "Enter a region; returns its token.");
  m.def("exit_autocast", &exit_autocast, py::arg("token"), "Leave the region of `token`.");
  m.def("is_autocast_enabled", &is_autocast_enabled, py::arg("device_type"));
  m.def("get_autocast_dtype", &get_autocast_dtype, py::arg("device_type"));

  // ---- grad scaler ----
  py::class_<GradScalerOptions>(m, "GradScalerOptions")
      .def(py::init<>())
      .def_readwrite("init_scale", &GradScalerOptions::init_scale)
      .def_readwrite("growth_factor", &GradScalerOptions::growth_factor)
      .def_readwrite("backoff_factor", &GradScalerOptions::backoff_factor)
      .def_readwrite("growth_interval", &GradScalerOptions::growth_interval)
      .def_readwrite("enabled", &GradScalerOptions::enabled);
  py::class_<ScalerState>(m, "ScalerState", "torch.amp.GradScaler.state_dict(), as a struct.")
      .def(py::init<double, double, double, double, double>(), py::arg("scale"),
           py::arg("growth_factor"), py::arg("backoff_factor"), py::arg("growth_interval"),
           py::arg("growth_tracker"))
      .def_readonly("scale", &ScalerState::scale)
      .def_readonly("growth_factor", &ScalerState::growth_factor)
      .def_readonly("backoff_factor", &ScalerState::backoff_factor)
      .def_readonly("growth_interval", &ScalerState::growth_interval)
      .def_readonly("growth_tracker", &ScalerState::growth_tracker);
  py::enum_<OptimizerStage>(m, "OptimizerStage")
      .value("READY", OptimizerStage::Ready)
      .value("UNSCALED", OptimizerStage::Unscaled)
      .value("STEPPED", OptimizerStage::Stepped);
  py::class_<ParamList>(m, "ParamList", "An optimizer's parameters, flattened over its groups.")
      .def(py::init<std::vector<at::Tensor>>(), py::arg("params"))
      .def("reset", &ParamList::reset, py::arg("params"))
      .def_property_readonly("id", &ParamList::id)
      .def("__len__", &ParamList::size);
  py::class_<FusedStepArgs>(m, "FusedStepArgs")
      .def_readonly("grad_scale", &FusedStepArgs::grad_scale)
      .def_readonly("found_inf", &FusedStepArgs::found_inf);
  py::class_<GradScaler>(m, "GradScaler", "The grad-scaler state machine (see grad_scaler.h).")
      .def(py::init<const std::string&, const GradScalerOptions&>(), py::arg("device"),
           py::arg("options"))
      .def("is_enabled", &GradScaler::is_enabled)
      .def_property_readonly("device", &GradScaler::device)
      .def_property_readonly("warning", &GradScaler::warning)
      .def("scale", &GradScaler::scale, py::arg("outputs"))
      .def("unscale_", &GradScaler::unscale_, py::arg("optimizer"))
      .def("prepare_step", &GradScaler::prepare_step, py::arg("optimizer"))
      .def("prepare_fused_step", &GradScaler::prepare_fused_step, py::arg("optimizer"),
           py::arg("existing_grad_scale"))
      .def("mark_stepped", &GradScaler::mark_stepped, py::arg("optimizer"))
      .def("update", py::overload_cast<>(&GradScaler::update))
      .def("update_to", py::overload_cast<const at::Tensor&>(&GradScaler::update),
           py::arg("new_scale"))
      .def("update_to", py::overload_cast<double>(&GradScaler::update), py::arg("new_scale"))
      .def("get_scale", &GradScaler::get_scale)
      .def("state_dict", &GradScaler::state_dict)
      .def("load_state_dict", &GradScaler::load_state_dict, py::arg("state"))
      .def("get_growth_factor", &GradScaler::growth_factor)
      .def("get_backoff_factor", &GradScaler::backoff_factor)
      .def("get_growth_interval", &GradScaler::growth_interval)
      .def("set_growth_factor", &GradScaler::set_growth_factor, py::arg("new_factor"))
      .def("set_backoff_factor", &GradScaler::set_backoff_factor, py::arg("new_factor"))
      .def("set_growth_interval", &GradScaler::set_growth_interval, py::arg("new_interval"))
      .def("has_optimizer_states", &GradScaler::has_optimizer_states)
      .def("stage", &GradScaler::stage, py::arg("optimizer"))
      .def_property_readonly("host_reads", &GradScaler::host_reads);
}
