// ampkit._C: declarations only. Every behaviour lives in core/; this file names it for Python.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include "ampkit/autocast.h"
#include "ampkit/errors.h"
#include "ampkit/grad_scaler.h"

namespace py = pybind11;
using namespace ampkit;

namespace {
// A core warning text, raised as a Python UserWarning (or as an error when warnings are errors).
// Stack level 1: the line that built ampkit.autocast (its construction has no Python frame).
void warn(const std::string& message) {
  if (!message.empty() && PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) {
    throw py::error_already_set();
  }
}

// {torch.device: found_inf}, as torch.amp's found_inf_per_device.
py::dict per_device(const PerDevice& found) {
  py::dict out;
  for (const auto& [device, tensor] : found) out[py::cast(device)] = tensor;
  return out;
}

std::optional<at::Tensor> if_defined(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return tensor;
}

PyObject* is_compiling(PyObject*, PyObject*) {
  // The module's namespace and the interned key, looked up once and kept for the process.
  static PyObject* compiler = PyImport_ImportModule("torch.compiler");
  static PyObject* globals = compiler ? PyModule_GetDict(compiler) : nullptr;
  static PyObject* key = PyUnicode_InternFromString("_is_compiling_flag");
  if (globals == nullptr) return nullptr;
  PyObject* flag = PyDict_GetItemWithError(globals, key);  // borrowed
  if (flag == nullptr) return PyErr_Occurred() ? nullptr : Py_NewRef(Py_False);
  return Py_NewRef(flag);
}

// ampkit.autocast.__new__ (python/ampkit/autocast.py installs it): (cls, device_type, dtype=None,
// enabled=True, cache_enabled=None). While torch.compile traces it returns torch.autocast(...),
// which Dynamo understands; otherwise a region, allocated and initialised without a Python frame.
PyObject* new_region(PyObject*, PyObject* args, PyObject* kwargs) {
  static PyObject* torch_autocast = nullptr;
  static PyObject* empty = PyTuple_New(0);
  static const char* names[] = {"cls", "device_type", "dtype", "enabled", "cache_enabled", nullptr};
  PyObject *cls = nullptr, *device_type = nullptr;
  PyObject *dtype = Py_None, *enabled = Py_True, *cache_enabled = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O|OOO:autocast", const_cast<char**>(names),
                                   &PyType_Type, &cls, &device_type, &dtype, &enabled,
                                   &cache_enabled)) {
    return nullptr;
  }
  PyObject* flag = is_compiling(nullptr, nullptr);
  if (flag == nullptr) return nullptr;
  const bool compiling = flag == Py_True;
  Py_DECREF(flag);
  if (compiling) {
    if (torch_autocast == nullptr) {
      PyObject* mod = PyImport_ImportModule("torch.amp.autocast_mode");
      torch_autocast = mod ? PyObject_GetAttrString(mod, "autocast") : nullptr;
      Py_XDECREF(mod);
      if (torch_autocast == nullptr) return nullptr;
    }
    return PyObject_CallFunctionObjArgs(torch_autocast, device_type, dtype, enabled, cache_enabled,
                                        nullptr);
  }
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  // The arguments' types, as the region's pybind11 constructor checks them (noconvert flags).
  // A mismatch raises the error python/ampkit/autocast.py builds, naming the argument.
  const bool typed = PyUnicode_Check(device_type) && (dtype == Py_None || THPDtype_Check(dtype)) &&
                     PyBool_Check(enabled) &&
                     (cache_enabled == Py_None || PyBool_Check(cache_enabled));
  if (!typed) {
    PyObject* mod = PyImport_ImportModule("ampkit.autocast");
    PyObject* build = mod ? PyObject_GetAttrString(mod, "_argument_type_error") : nullptr;
    PyObject* error = build ? PyObject_CallFunctionObjArgs(build, device_type, dtype, enabled,
                                                           cache_enabled, nullptr)
                            : nullptr;
    if (error != nullptr) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error)), error);
    Py_XDECREF(error);
    Py_XDECREF(build);
    Py_XDECREF(mod);
    return nullptr;
  }
  // The common case without pybind11's dispatcher: the C++ region is built here and handed to a
  // fresh instance of `cls` as its value, the way pybind11's own factory constructors do.
  std::unique_ptr<AutocastRegion> region;
  try {
    std::optional<at::ScalarType> scalar_type;
    if (dtype != Py_None) scalar_type = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
    std::optional<bool> cache;
    if (cache_enabled != Py_None) cache = cache_enabled == Py_True;
    region = std::make_unique<AutocastRegion>(PyUnicode_AsUTF8(device_type), scalar_type,
                                              enabled == Py_True, cache);
    warn(region->warning());
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
  PyObject* self = type->tp_base->tp_new(type, empty, nullptr);
  if (self == nullptr) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  auto v_h = inst->get_value_and_holder(py::detail::get_type_info(typeid(AutocastRegion)));
  v_h.value_ptr() = region.release();
  v_h.type->init_instance(inst, nullptr);  // the holder takes ownership; the instance registers
  return self;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ampkit's C++ core: the autocast guard and the grad-scaler state machine.";

  // Each core error is also the built-in type torch.amp raises for the same misuse
  // (see core/include/ampkit/errors.h).
  py::register_exception<ArgumentError>(
      m, "ArgumentError",
      py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_AssertionError)))
      .attr("__doc__") =
      "An argument outside its rule; a ValueError (and an AssertionError, which "
      "torch.amp raises for bad factors).";
  py::register_exception<DeviceStringError>(
      m, "DeviceStringError",
      py::make_tuple(m.attr("ArgumentError"), py::handle(PyExc_RuntimeError)))
      .attr("__doc__") =
      "A string that names no device: an ArgumentError (a ValueError) and a "
      "RuntimeError, the type torch raises for it.";
  py::register_exception<ArgumentTypeError>(m, "ArgumentTypeError", PyExc_TypeError)
      .attr("__doc__") = "An argument of the wrong type; a TypeError.";
  auto state_error = py::register_exception<StateError>(
      m, "StateError",
      py::make_tuple(py::handle(PyExc_RuntimeError), py::handle(PyExc_AssertionError)));
  state_error.attr("__doc__") =
      "A call out of order (unscale_ twice, step twice, update with no inf checks, "
      "...); a RuntimeError and an AssertionError, as torch.amp raises either.";

  // ---- autocast ----
  // Only what ampkit.autocast and the R package use: a request's warning (R warns before
  // entering a disabled region) and a token's `active` (R prints a context as open or exited).
  py::class_<AutocastRequest>(m, "AutocastRequest", "A resolved autocast request.")
      .def_readonly("warning", &AutocastRequest::warning);
  py::class_<AutocastToken>(m, "AutocastToken", "Proof that an autocast region was entered.")
      .def_property_readonly("active", &AutocastToken::active);
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
      .def("__enter__",
           [](py::object self) {
             self.cast<AutocastRegion&>().enter();
             return self;
           })
      // Exits release the GIL, as torch's clear_autocast_cache does: leaving the outermost region
      // clears the cast cache under its mutex, which another thread may hold while its cast
      // re-enters Python (a dispatch mode, a tensor subclass) and waits for the GIL.
      .def("__exit__",
           [](AutocastRegion& self, py::args) {
             py::gil_scoped_release no_gil;
             self.exit();
             return false;
           })
      .def_property_readonly("device", &AutocastRegion::device_type_name)
      .def_property_readonly("fast_dtype",
                             [](const AutocastRegion& self) { return self.request().dtype; })
      .def_property_readonly("enabled",
                             [](const AutocastRegion& self) { return self.request().enabled; })
      .def_property_readonly(
          "cache_enabled", [](const AutocastRegion& self) { return self.request().cache_enabled; })
      .def_property_readonly("request", &AutocastRegion::request);
  m.def("resolve_autocast", &resolve_autocast, py::arg("device_type"), py::arg("dtype"),
        py::arg("enabled").noconvert(), py::arg("cache_enabled").noconvert(),
        "Resolve a request as torch.autocast.__init__ does; the warning, if any, is returned.");
  m.def("enter_autocast", &enter_autocast, py::arg("request"),
        "Enter a region; returns its token.");
  m.def("exit_autocast", &exit_autocast, py::arg("token"), py::call_guard<py::gil_scoped_release>(),
        "Leave the region of `token` (without the GIL: see __exit__).");
  m.def("is_autocast_enabled", &is_autocast_enabled, py::arg("device_type"));
  m.def("get_autocast_dtype", &get_autocast_dtype, py::arg("device_type"));
  // torch.compiler.is_compiling() without its Python frame, for ampkit.autocast's hot __new__:
  // the flag torch.compile holds True while it traces. A plain CPython function (pybind11's
  // dispatch would cost more than the frame it saves). Dynamo cannot trace a C function, so
  // python/ampkit/autocast.py registers torch.compiler.is_compiling as its substitute in graphs.
  static PyMethodDef is_compiling_def = {"is_compiling", &is_compiling, METH_NOARGS,
                                         "Whether torch.compile is tracing (its flag)."};
  m.add_object("is_compiling",
               py::reinterpret_steal<py::object>(PyCFunction_New(&is_compiling_def, nullptr)));
  static PyMethodDef new_region_def = {"new_region", reinterpret_cast<PyCFunction>(&new_region),
                                       METH_VARARGS | METH_KEYWORDS,
                                       "ampkit.autocast.__new__: a region, or torch.autocast "
                                       "while torch.compile traces."};
  m.add_object("new_region",
               py::reinterpret_steal<py::object>(PyCFunction_New(&new_region_def, nullptr)));

  // ---- grad scaler ----
  py::register_exception<ScaleCollapseError>(m, "ScaleCollapseError", state_error).attr("__doc__") =
      "The loss scale collapsed: a gradient overflowed while the scale was already at min_scale "
      "(on_min_scale='raise'); a StateError, so a RuntimeError.";
  py::class_<GradScalerOptions>(m, "GradScalerOptions")
      .def(py::init<>())
      .def_readwrite("init_scale", &GradScalerOptions::init_scale)
      .def_readwrite("growth_factor", &GradScalerOptions::growth_factor)
      .def_readwrite("backoff_factor", &GradScalerOptions::backoff_factor)
      .def_readwrite("growth_interval", &GradScalerOptions::growth_interval)
      .def_readwrite("enabled", &GradScalerOptions::enabled)
      .def_property(
          "min_scale", [](const GradScalerOptions& o) { return o.policy.min_scale; },
          [](GradScalerOptions& o, std::optional<double> v) { o.policy.min_scale = v; })
      .def_property(
          "max_scale", [](const GradScalerOptions& o) { return o.policy.max_scale; },
          [](GradScalerOptions& o, std::optional<double> v) { o.policy.max_scale = v; })
      .def_property(
          "hysteresis", [](const GradScalerOptions& o) { return o.policy.hysteresis; },
          [](GradScalerOptions& o, double v) { o.policy.hysteresis = v; })
      .def_property(
          "consecutive_hysteresis",
          [](const GradScalerOptions& o) { return o.policy.consecutive_hysteresis; },
          [](GradScalerOptions& o, bool v) { o.policy.consecutive_hysteresis = v; })
      .def_property(
          "on_min_scale",
          [](const GradScalerOptions& o) { return on_min_scale_name(o.policy.on_min_scale); },
          [](GradScalerOptions& o, const std::string& v) {
            o.policy.on_min_scale = parse_on_min_scale(v);
          })
      .def_readwrite("track_overflow", &GradScalerOptions::track_overflow)
      .def_readwrite("allow_fp16_grads", &GradScalerOptions::allow_fp16_grads);
  // The checkpoint format is the core's (scaler_checkpoint.h): its keys, their kinds, and the key
  // check run before any value is converted.
  m.def(
      "unscale_grads",
      [](const ParamList& params, const at::Tensor& inv_scale, const at::Tensor& found_inf,
         bool allow_fp16) {
        return per_device(unscale_grads(params, inv_scale, allow_fp16, found_inf));
      },
      py::arg("params"), py::arg("inv_scale"), py::arg("found_inf"), py::arg("allow_fp16"),
      "torch.amp's _unscale_grads_: unscale and check, recording into found_inf's device.");
  m.attr("STATE_KEYS") = py::cast(std::vector<std::string>(kStateKeys.begin(), kStateKeys.end()));
  m.def("check_state_keys", &check_state_keys, py::arg("keys"),
        "Refuse a key list without torch.amp's keys or with an unknown key.");
  py::class_<ParamList>(m, "ParamList", "An optimizer's parameters, flattened over its groups.")
      .def(py::init<std::vector<at::Tensor>, std::vector<std::string>>(), py::arg("params"),
           py::arg("names"))
      .def("reset", &ParamList::reset, py::arg("params"), py::arg("names"));
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
      .def("unscale_", &GradScaler::unscale_, py::arg("params"))
      .def("may_step", &GradScaler::may_step, py::arg("params"))
      .def("fused_step_args", &GradScaler::fused_step_args, py::arg("params"),
           py::arg("existing_grad_scale"))
      .def("check_can_step", &GradScaler::check_can_step, py::arg("params"))
      .def("mark_stepped", &GradScaler::mark_stepped, py::arg("params"))
      .def("update", py::overload_cast<>(&GradScaler::update),
           "Returns a warning to emit (on_min_scale='warn'), or ''.")
      .def("update_to", py::overload_cast<const at::Tensor&>(&GradScaler::update),
           py::arg("new_scale"))
      .def("update_to", py::overload_cast<double>(&GradScaler::update), py::arg("new_scale"))
      .def("step_was_skipped", &GradScaler::step_was_skipped, py::arg("params"))
      .def("stats",
           [](GradScaler& self) {
             const ScalerStats s = self.stats();
             py::dict out;
             out["steps"] = s.steps;
             out["skipped_steps"] = s.skipped_steps;
             out["consecutive_skipped_steps"] = s.consecutive_skipped_steps;
             out["scale"] = s.scale;
             return out;
           })
      .def("overflow_report",
           [](const GradScaler& self) {
             py::list out;
             for (const auto& e : self.overflow_report()) {
               py::dict row;
               row["name"] = e.name;
               row["inf"] = e.inf;
               row["nan"] = e.nan;
               out.append(row);
             }
             return out;
           })
      .def("get_scale", &GradScaler::get_scale)
      .def(
          "state_dict",
          [](GradScaler& self) {
            py::dict out;
            for (const auto& [key, value] : to_state_dict(self.state_dict())) {
              out[py::str(key)] = py::cast(value);
            }
            return out;
          },
          "The state dict: torch.amp's keys, then ampkit's (scaler_checkpoint.h).")
      .def(
          "load_state_dict",
          [](GradScaler& self, const std::map<std::string, StateValue>& values) {
            self.load_state_dict(from_state_dict(values, self.state_dict()));
          },
          py::arg("state"), "Load a state dict; checked whole (keys, kinds, rules) first.")
      .def("get_growth_factor", &GradScaler::growth_factor)
      .def("get_backoff_factor", &GradScaler::backoff_factor)
      .def("get_growth_interval", &GradScaler::growth_interval)
      .def("set_growth_factor", &GradScaler::set_growth_factor, py::arg("new_factor"))
      .def("set_backoff_factor", &GradScaler::set_backoff_factor, py::arg("new_factor"))
      .def("set_growth_interval", &GradScaler::set_growth_interval, py::arg("new_interval"))
      .def_property_readonly("scale_tensor",
                             [](const GradScaler& self) { return if_defined(self.scale_tensor()); })
      .def_property_readonly(
          "growth_tracker_tensor",
          [](const GradScaler& self) { return if_defined(self.growth_tracker_tensor()); })
      .def_property_readonly("init_scale", &GradScaler::init_scale)
      .def_property("init_growth_tracker", &GradScaler::init_growth_tracker,
                    &GradScaler::set_init_growth_tracker)
      .def("init_on", &GradScaler::init_on, py::arg("device"))
      .def(
          "check_inf",
          [](GradScaler& self, const ParamList& params) {
            return per_device(self.check_inf(params));
          },
          py::arg("params"))
      .def(
          "found_inf_per_device",
          [](const GradScaler& self, const ParamList& params) {
            return per_device(self.found_inf_per_device(params));
          },
          py::arg("params"))
      .def(
          "stage",
          [](const GradScaler& self, const ParamList& params) -> std::optional<std::string> {
            const auto stage = self.stage(params);
            if (!stage) return std::nullopt;
            static const char* names[] = {"READY", "UNSCALED", "STEPPED"};
            return names[static_cast<int>(*stage)];
          },
          py::arg("params"), "The stage's name (torch.amp's OptState), or None.")
      .def("set_found_inf_agreement", &GradScaler::set_found_inf_agreement, py::arg("agree"),
           "A callable given each unscale's found_inf tensors, to agree on them in place.")
      .def("has_optimizer_states", &GradScaler::has_optimizer_states)
      .def_property_readonly("host_reads", &GradScaler::host_reads)
      .def("use_tensor_ops_for_policy", &GradScaler::use_tensor_ops_for_policy, py::arg("value"),
           "Tests only: a CPU scaler's policy update through the accelerator path.");
}
