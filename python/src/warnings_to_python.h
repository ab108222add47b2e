// c10 warnings raised while the core runs ATen ops (a synchronizing CUDA call under
// torch.cuda.set_sync_debug_mode("warn"), a deprecation) reach Python as Python warnings, as they
// do from torch's own functions, instead of text on stderr: a drop-in for torch.amp must warn
// where torch.amp's Python code warns, and a warning filter set to "error" must raise.
//
// Used as a pybind11 call guard (py::call_guard<WarningsToPython>()): the guard collects the
// call's warnings on this thread, then issues them after the call returns, the C++ source
// location in the message as torch writes it. When the call throws, the warnings go to the handler
// that was in place (c10's prints them) and the exception goes on unchanged.
#pragma once

#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <variant>
#include <vector>

namespace ampkit_python {

class WarningsToPython {
 public:
  WarningsToPython()
      : previous_(c10::WarningUtils::get_warning_handler()),
        exceptions_(std::uncaught_exceptions()) {
    c10::WarningUtils::set_warning_handler(&collected_);
  }
  WarningsToPython(const WarningsToPython&) = delete;
  WarningsToPython& operator=(const WarningsToPython&) = delete;

  // noexcept(false): a warning that a filter turns into an error becomes the call's exception.
  ~WarningsToPython() noexcept(false) {
    c10::WarningUtils::set_warning_handler(previous_);
    if (collected_.warnings.empty()) return;
    if (std::uncaught_exceptions() > exceptions_) {
      for (const auto& warning : collected_.warnings) previous_->process(warning);
      return;
    }
    pybind11::gil_scoped_acquire gil;
    for (const auto& warning : collected_.warnings) {
      PyObject* category = std::holds_alternative<c10::DeprecationWarning>(warning.type())
                               ? PyExc_DeprecationWarning
                               : PyExc_UserWarning;
      if (PyErr_WarnEx(category, text(warning).c_str(), 1) < 0) {
        throw pybind11::error_already_set();
      }
    }
  }

 private:
  struct Collected : c10::WarningHandler {
    std::vector<c10::Warning> warnings;
    void process(const c10::Warning& warning) override { warnings.push_back(warning); }
  };

  // torch's own wording: "<message> (Triggered internally at <file>:<line>.)".
  static std::string text(const c10::Warning& warning) {
    const auto& where = warning.source_location();
    if (warning.verbatim() || where.file == nullptr) return warning.msg();
    return warning.msg() + " (Triggered internally at " + where.file + ":" +
           std::to_string(where.line) + ".)";
  }

  Collected collected_;
  c10::WarningHandler* previous_;
  int exceptions_;
};

}  // namespace ampkit_python
