/* Executables: compile StableHLO, run on one device, serialize for the
 * cache and load back. */
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

/* Serialized xla.CompileOptionsProto, never empty (the CUDA plugin aborts the
 * process on empty options):
 *   executable_build_options (3) { num_replicas (4): 1, num_partitions (5): 1 }
 *   compile_portable_executable (4): true
 * Portable means no device is fixed at compile time; execute names the device
 * through execute_device, so one executable serves every device. */
static const char compile_options[] = {0x1a, 0x04, 0x20, 0x01, 0x28, 0x01, 0x20, 0x01};

const char* tpu_pjrt_compile_options_name(void) { return "1-replica-1-partition-portable"; }

/* More arguments than this take a heap list of non-donatable indices. */
#define STACK_ARGS 64

tpu_status tpu_pjrt_compile(tpu_pjrt* pjrt, const char* mlir, size_t mlir_size,
                            struct PJRT_LoadedExecutable** out_executable) {
  if (!out_executable) return TPU_ERROR(TPU_INVALID_ARGUMENT, "compile: out_executable is NULL");
  *out_executable = NULL;
  if (!pjrt) return TPU_ERROR(TPU_INVALID_ARGUMENT, "compile: pjrt is NULL");
  if (!mlir || mlir_size == 0)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "compile: empty MLIR program (%zu bytes)", mlir_size);
  const PJRT_Api* api = pjrt->api;

  PJRT_Program program;
  memset(&program, 0, sizeof program);
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.code = (char*)mlir; /* read only: compile does not write it */
  program.code_size = mlir_size;
  program.format = "mlir";
  program.format_size = strlen(program.format);

  PJRT_Client_Compile_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  args.client = pjrt->client;
  args.program = &program;
  args.compile_options = compile_options;
  args.compile_options_size = sizeof compile_options;
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Client_Compile(&args), "PJRT_Client_Compile"));
  *out_executable = args.executable;
  return NULL;
}

/* The unloaded PJRT_Executable behind a loaded one; the caller destroys it. */
static tpu_status get_executable(tpu_pjrt* pjrt, PJRT_LoadedExecutable* loaded,
                                 PJRT_Executable** out) {
  PJRT_LoadedExecutable_GetExecutable_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  args.loaded_executable = loaded;
  *out = NULL;
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(pjrt->api,
                                     pjrt->api->PJRT_LoadedExecutable_GetExecutable(&args),
                                     "PJRT_LoadedExecutable_GetExecutable"));
  *out = args.executable;
  return NULL;
}

static void destroy_executable(tpu_pjrt* pjrt, PJRT_Executable* executable) {
  PJRT_Executable_Destroy_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  args.executable = executable;
  tpu_pjrt_error_drop(pjrt->api, pjrt->api->PJRT_Executable_Destroy(&args));
}

static tpu_status num_outputs(tpu_pjrt* pjrt, PJRT_LoadedExecutable* loaded, size_t* out_count) {
  *out_count = 0;
  PJRT_Executable* executable;
  TPU_RETURN_IF_ERROR(get_executable(pjrt, loaded, &executable));
  PJRT_Executable_NumOutputs_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE;
  args.executable = executable;
  tpu_status status = tpu_pjrt_error(pjrt->api, pjrt->api->PJRT_Executable_NumOutputs(&args),
                                     "PJRT_Executable_NumOutputs");
  destroy_executable(pjrt, executable);
  *out_count = args.num_outputs;
  return status;
}

/* 0 when the plugin cannot say (or for NULL arguments). */
size_t tpu_pjrt_executable_output_count(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable) {
  if (!pjrt || !executable) return 0;
  size_t count;
  tpu_status status = num_outputs(pjrt, executable, &count);
  if (status) {
    tpu_status_free(status);
    return 0;
  }
  return count;
}

void tpu_pjrt_executable_destroy(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable) {
  if (!pjrt || !executable) return;
  PJRT_LoadedExecutable_Destroy_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  args.executable = executable;
  tpu_pjrt_error_drop(pjrt->api, pjrt->api->PJRT_LoadedExecutable_Destroy(&args));
}

tpu_status tpu_pjrt_executable_serialize(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable,
                                         char** out_bytes, size_t* out_size) {
  if (!out_bytes || !out_size)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "serialize: NULL out_bytes or out_size");
  *out_bytes = NULL;
  *out_size = 0;
  if (!pjrt || !executable)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "serialize: NULL pjrt or executable");
  const PJRT_Api* api = pjrt->api;
  if (!TPU_PJRT_HAS(api, PJRT_Executable_Serialize))
    return tpu_pjrt_missing(pjrt, "PJRT_Executable_Serialize");

  PJRT_Executable* unloaded;
  TPU_RETURN_IF_ERROR(get_executable(pjrt, executable, &unloaded));
  PJRT_Executable_Serialize_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE;
  args.executable = unloaded;
  tpu_status status = tpu_pjrt_error(api, api->PJRT_Executable_Serialize(&args),
                                     "PJRT_Executable_Serialize");
  if (status) goto done;
  /* The bytes belong to serialized_executable: copy them, then free it. */
  *out_bytes = malloc(args.serialized_bytes_size ? args.serialized_bytes_size : 1);
  if (*out_bytes) {
    memcpy(*out_bytes, args.serialized_bytes, args.serialized_bytes_size);
    *out_size = args.serialized_bytes_size;
  } else {
    status =
        TPU_ERROR(TPU_OUT_OF_MEMORY, "serialize: copying %zu bytes", args.serialized_bytes_size);
  }
  if (args.serialized_executable_deleter)
    args.serialized_executable_deleter(args.serialized_executable);
done:
  destroy_executable(pjrt, unloaded);
  return status;
}

tpu_status tpu_pjrt_executable_deserialize(tpu_pjrt* pjrt, const char* bytes, size_t size,
                                           struct PJRT_LoadedExecutable** out_executable) {
  if (!out_executable)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "deserialize: out_executable is NULL");
  *out_executable = NULL;
  if (!pjrt) return TPU_ERROR(TPU_INVALID_ARGUMENT, "deserialize: pjrt is NULL");
  if (!bytes || size == 0)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "deserialize: empty executable (%zu bytes)", size);
  const PJRT_Api* api = pjrt->api;
  if (!TPU_PJRT_HAS(api, PJRT_Executable_DeserializeAndLoad))
    return tpu_pjrt_missing(pjrt, "PJRT_Executable_DeserializeAndLoad");

  PJRT_Executable_DeserializeAndLoad_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
  args.client = pjrt->client;
  args.serialized_executable = bytes;
  args.serialized_executable_size = size;
  /* No overridden options: the serialized ones (portable, one device) hold. */
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Executable_DeserializeAndLoad(&args),
                                     "PJRT_Executable_DeserializeAndLoad"));
  *out_executable = args.loaded_executable;
  return NULL;
}

tpu_status tpu_pjrt_execute(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable, int device,
                            struct PJRT_Buffer* const* args, size_t arg_count, const bool* donated,
                            struct PJRT_Buffer** out_outputs, size_t output_count) {
  if (out_outputs)
    for (size_t i = 0; i < output_count; i++) out_outputs[i] = NULL;
  if (!pjrt || !executable)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "execute: NULL pjrt or executable");
  if (device < 0 || device >= pjrt->device_count)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "execute: device %d outside [0, %d)", device,
                     pjrt->device_count);
  if (arg_count && !args)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "execute: %zu arguments but args is NULL", arg_count);
  for (size_t i = 0; i < arg_count; i++)
    if (!args[i]) return TPU_ERROR(TPU_INVALID_ARGUMENT, "execute: argument %zu is NULL", i);
  if (output_count && !out_outputs)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "execute: %zu outputs but out_outputs is NULL",
                     output_count);
  /* PJRT donates every input not listed: list all but the donated ones. */
  int64_t stack_indices[STACK_ARGS];
  int64_t* indices = stack_indices;
  if (arg_count > STACK_ARGS) {
    indices = malloc(arg_count * sizeof *indices);
    if (!indices) return TPU_ERROR(TPU_OUT_OF_MEMORY, "execute: %zu argument indices", arg_count);
  }
  size_t kept = 0;
  for (size_t i = 0; i < arg_count; i++)
    if (!donated || !donated[i]) indices[kept++] = (int64_t)i;

  PJRT_ExecuteOptions options;
  memset(&options, 0, sizeof options);
  options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  options.non_donatable_input_indices = indices;
  options.num_non_donatable_input_indices = kept;

  PJRT_Buffer* const* argument_lists[1] = {args};
  PJRT_Buffer** output_lists[1] = {out_outputs};
  PJRT_LoadedExecutable_Execute_Args exec;
  memset(&exec, 0, sizeof exec);
  exec.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  exec.executable = executable;
  exec.options = &options;
  exec.argument_lists = argument_lists;
  exec.num_devices = 1;
  exec.num_args = arg_count;
  exec.output_lists = output_lists;
  exec.execute_device = pjrt->devices[device]; /* one row, on the device asked for */
  tpu_status status = tpu_pjrt_error(pjrt->api, pjrt->api->PJRT_LoadedExecutable_Execute(&exec),
                                     "PJRT_LoadedExecutable_Execute");
  if (indices != stack_indices) free(indices);
  if (status) {
    for (size_t i = 0; i < output_count; i++) out_outputs[i] = NULL;
    return tpu_status_annotate(status, "on device %d with %zu arguments: ", device, arg_count);
  }
  return NULL;
}
