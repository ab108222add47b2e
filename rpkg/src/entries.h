// The package's hand-written .Call entry points and their numbers of arguments: the one list
// init.cpp registers (and declares here). Add an entry here when adding one to a .cpp file.
#pragma once

// One entry a line, as a list is read (clang-format would join them).
// clang-format off

#define AMPKIT_ENTRIES \
  AMPKIT_ENTRY(C_values_init, 4) \
  AMPKIT_ENTRY(C_tensor_from_r, 4) \
  AMPKIT_ENTRY(C_r_from_tensor, 2) \
  AMPKIT_ENTRY(C_tensor_from_buffer, 3) \
  AMPKIT_ENTRY(C_is_tensor, 1) \
  AMPKIT_ENTRY(C_release_tensors, 1) \
  AMPKIT_ENTRY(C_dtype_info, 1) \
  AMPKIT_ENTRY(C_dtype_named, 1) \
  AMPKIT_ENTRY(C_default_dtype, 1) \
  AMPKIT_ENTRY(C_device_info, 1) \
  AMPKIT_ENTRY(C_memory_stats, 2) \
  AMPKIT_ENTRY(C_memory_collect, 0) \
  AMPKIT_ENTRY(C_tensor_meta, 2) \
  AMPKIT_ENTRY(C_tensor_dollar_init, 3) \
  AMPKIT_ENTRY(C_tensor_dollar, 2) \
  AMPKIT_ENTRY(C_plain_sizes, 1) \
  AMPKIT_ENTRY(C_tensor_addresses, 1) \
  AMPKIT_ENTRY(C_tensor_items, 1) \
  AMPKIT_ENTRY(C_generator_new, 1) \
  AMPKIT_ENTRY(C_generator_seed, 2) \
  AMPKIT_ENTRY(C_manual_seed, 1) \
  AMPKIT_ENTRY(C_cuda, 2) \
  AMPKIT_ENTRY(C_backend, 1) \
  AMPKIT_ENTRY(C_num_threads, 1) \
  AMPKIT_ENTRY(C_num_interop_threads, 1) \
  AMPKIT_ENTRY(C_keep_freed_heap, 1) \
  AMPKIT_ENTRY(C_release_freed_heap, 0) \
  AMPKIT_ENTRY(C_tensor_share, 1) \
  AMPKIT_ENTRY(C_tensor_adopt, 1) \
  AMPKIT_ENTRY(C_rng_state, 2) \
  AMPKIT_ENTRY(C_op_table, 1) \
  AMPKIT_ENTRY(C_op_schemas, 1) \
  AMPKIT_ENTRY(C_amp_init, 0) \
  AMPKIT_ENTRY(C_autocast_enter, 4) \
  AMPKIT_ENTRY(C_autocast_exit, 1) \
  AMPKIT_ENTRY(C_autocast_unwind, 1) \
  AMPKIT_ENTRY(C_with_autocast, 5) \
  AMPKIT_ENTRY(C_module_lookup, 2) \
  AMPKIT_ENTRY(C_module_chain, 2) \
  AMPKIT_ENTRY(C_module_tensors, 2) \
  AMPKIT_ENTRY(C_native_layers, 2) \
  AMPKIT_ENTRY(C_autocast_token_open, 1) \
  AMPKIT_ENTRY(C_autocast_state, 1) \
  AMPKIT_ENTRY(C_scaler_new, 3) \
  AMPKIT_ENTRY(C_scaler_option_defaults, 0) \
  AMPKIT_ENTRY(C_scaler_options, 1) \
  AMPKIT_ENTRY(C_scaler_info, 1) \
  AMPKIT_ENTRY(C_scaler_scale, 2) \
  AMPKIT_ENTRY(C_param_list, 2) \
  AMPKIT_ENTRY(C_param_list_reset, 3) \
  AMPKIT_ENTRY(C_param_names, 3) \
  AMPKIT_ENTRY(C_scaler_unscale, 2) \
  AMPKIT_ENTRY(C_scaler_may_step, 2) \
  AMPKIT_ENTRY(C_scaler_mark_stepped, 2) \
  AMPKIT_ENTRY(C_scaler_check_can_step, 2) \
  AMPKIT_ENTRY(C_scaler_fused_step_args, 3) \
  AMPKIT_ENTRY(C_scaler_update, 2) \
  AMPKIT_ENTRY(C_scaler_step_was_skipped, 2) \
  AMPKIT_ENTRY(C_scaler_get_scale, 1) \
  AMPKIT_ENTRY(C_scaler_scale_tensor, 1) \
  AMPKIT_ENTRY(C_scaler_stats, 1) \
  AMPKIT_ENTRY(C_scaler_overflow_report, 1) \
  AMPKIT_ENTRY(C_scaler_state_dict, 1) \
  AMPKIT_ENTRY(C_scaler_load_state_dict, 2) \
  AMPKIT_ENTRY(C_scaler_factor, 3) \
  AMPKIT_ENTRY(C_autograd_init, 0) \
  AMPKIT_ENTRY(C_on_r_thread, 0) \
  AMPKIT_ENTRY(C_python_started, 0) \
  AMPKIT_ENTRY(C_grad_mode, 1) \
  AMPKIT_ENTRY(C_anomaly_mode, 1) \
  AMPKIT_ENTRY(C_backward, 5) \
  AMPKIT_ENTRY(C_autograd_grad, 6) \
  AMPKIT_ENTRY(C_tensor_autograd, 3) \
  AMPKIT_ENTRY(C_node_info, 1) \
  AMPKIT_ENTRY(C_grads, 1) \
  AMPKIT_ENTRY(C_zero_grad, 2) \
  AMPKIT_ENTRY(C_register_hook, 2) \
  AMPKIT_ENTRY(C_remove_hook, 2) \
  AMPKIT_ENTRY(C_autograd_function_apply, 4) \
  AMPKIT_ENTRY(C_autograd_context, 3) \
  AMPKIT_ENTRY(C_zero_based, 2) \
  AMPKIT_ENTRY(C_tensor_index, 3) \
  AMPKIT_ENTRY(C_index_args, 1) \
  AMPKIT_ENTRY(C_tensor_index_put, 3) \
  AMPKIT_ENTRY(C_pickle_save, 1) \
  AMPKIT_ENTRY(C_pickle_load, 1) \
  AMPKIT_ENTRY(C_policy_push, 1) \
  AMPKIT_ENTRY(C_policy_pop, 0) \
  AMPKIT_ENTRY(C_policy_current, 0) \
  AMPKIT_ENTRY(C_jit_trace, 5) \
  AMPKIT_ENTRY(C_jit_call, 2) \
  AMPKIT_ENTRY(C_jit_graph, 2) \
  AMPKIT_ENTRY(C_jit_function_save, 3) \
  AMPKIT_ENTRY(C_jit_module_new, 2) \
  AMPKIT_ENTRY(C_jit_module_register, 4) \
  AMPKIT_ENTRY(C_jit_module_info, 3) \
  AMPKIT_ENTRY(C_jit_module_add_constant, 3) \
  AMPKIT_ENTRY(C_jit_module_train, 2) \
  AMPKIT_ENTRY(C_jit_module_method, 2) \
  AMPKIT_ENTRY(C_jit_module_save, 3) \
  AMPKIT_ENTRY(C_jit_load, 1) \
  AMPKIT_ENTRY(C_jit_compile, 1) \
  AMPKIT_ENTRY(C_jit_unit_function, 2) \
  AMPKIT_ENTRY(C_jit_operators, 1) \
  AMPKIT_ENTRY(C_jit_execute, 2) \
  AMPKIT_ENTRY(C_policy_float32_args, 1) \
  AMPKIT_ENTRY(C_locator_new, 0) \
  AMPKIT_ENTRY(C_locator_forward, 4) \
  AMPKIT_ENTRY(C_locator_params, 3) \
  AMPKIT_ENTRY(C_locator_op, 3) \
  AMPKIT_ENTRY(C_ignite_new, 3) \
  AMPKIT_ENTRY(C_ignite_add_group, 3) \
  AMPKIT_ENTRY(C_ignite_groups, 1) \
  AMPKIT_ENTRY(C_ignite_set_groups, 2) \
  AMPKIT_ENTRY(C_ignite_step, 1) \
  AMPKIT_ENTRY(C_ignite_zero_grad, 1) \
  AMPKIT_ENTRY(C_ignite_states, 3) \
  AMPKIT_ENTRY(C_ignite_set_states, 3) \
  AMPKIT_ENTRY(C_foreach_adam, 3) \
  AMPKIT_ENTRY(C_sgd_update, 3) \
  AMPKIT_ENTRY(C_rmsprop_update, 3) \
  AMPKIT_ENTRY(C_adagrad_update, 3) \
  AMPKIT_ENTRY(C_rprop_update, 3) \
  AMPKIT_ENTRY(C_asgd_update, 3) \
  AMPKIT_ENTRY(C_adadelta_update, 3) \
  AMPKIT_ENTRY(C_contrib_sort_vertices, 3)

#define AMPKIT_ENTRY(name, n) extern "C" SEXP name(AMPKIT_ARGS_##n);
#define AMPKIT_ARGS_0 void
#define AMPKIT_ARGS_1 SEXP
#define AMPKIT_ARGS_2 SEXP, SEXP
#define AMPKIT_ARGS_3 SEXP, SEXP, SEXP
#define AMPKIT_ARGS_4 SEXP, SEXP, SEXP, SEXP
#define AMPKIT_ARGS_5 SEXP, SEXP, SEXP, SEXP, SEXP
#define AMPKIT_ARGS_6 SEXP, SEXP, SEXP, SEXP, SEXP, SEXP
#define AMPKIT_ARGS_7 SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP
#define AMPKIT_ARGS_8 SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP
AMPKIT_ENTRIES
#undef AMPKIT_ENTRY
// clang-format on
