/* Loading a PJRT plugin, creating its client, and what the client reports
 * about itself: platform, versions, devices. Also the error helpers the
 * other pjrt_*.c files share. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pjrt/pjrt_internal.h"

/* ---- errors ---- */

static const char* error_code_name(PJRT_Error_Code code) {
  /* Indexed by PJRT_Error_Code, which follows absl's status codes. */
  static const char* const names[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  return (unsigned)code < sizeof names / sizeof names[0] ? names[code] : "?";
}

void tpu_pjrt_error_drop(const PJRT_Api* api, PJRT_Error* error) {
  if (!error) return;
  PJRT_Error_Destroy_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  args.error = error;
  api->PJRT_Error_Destroy(&args);
}

tpu_status tpu_pjrt_error(const PJRT_Api* api, PJRT_Error* error, const char* call) {
  if (!error) return NULL;
  PJRT_Error_Message_Args msg;
  memset(&msg, 0, sizeof msg);
  msg.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  msg.error = error;
  api->PJRT_Error_Message(&msg);

  PJRT_Error_GetCode_Args code;
  memset(&code, 0, sizeof code);
  code.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  code.error = error;
  code.code = PJRT_Error_Code_UNKNOWN;
  /* GetCode itself returns an error only on a broken plugin; keep UNKNOWN. */
  tpu_pjrt_error_drop(api, api->PJRT_Error_GetCode(&code));

  /* The message lives only as long as the error: copy it before destroying. */
  int len = msg.message_size > 65536 ? 65536 : (int)msg.message_size;
  tpu_status status = TPU_ERROR(TPU_PLUGIN_ERROR, "%s failed [%s]: %.*s", call,
                                error_code_name(code.code), len,
                                msg.message ? msg.message : "");
  tpu_pjrt_error_drop(api, error);
  return status;
}

void tpu_pjrt_event_drop(const PJRT_Api* api, PJRT_Event* event) {
  if (!event) return;
  PJRT_Event_Destroy_Args destroy;
  memset(&destroy, 0, sizeof destroy);
  destroy.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  destroy.event = event;
  tpu_pjrt_error_drop(api, api->PJRT_Event_Destroy(&destroy));
}

tpu_status tpu_pjrt_event_finish(const PJRT_Api* api, PJRT_Event* event, const char* what) {
  if (!event) return NULL;
  PJRT_Event_Await_Args await;
  memset(&await, 0, sizeof await);
  await.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  await.event = event;
  tpu_status status = tpu_pjrt_error(api, api->PJRT_Event_Await(&await), what);
  tpu_pjrt_event_drop(api, event);
  return status;
}

tpu_status tpu_pjrt_missing(const tpu_pjrt* pjrt, const char* slot) {
  return TPU_ERROR(TPU_UNIMPLEMENTED, "PJRT plugin %s (C API %d.%d) does not provide %s",
                   pjrt->plugin_path, pjrt->api->pjrt_api_version.major_version,
                   pjrt->api->pjrt_api_version.minor_version, slot);
}

/* ---- open ---- */

/* Plugins whose PJRT_Plugin_Initialize already ran. Process-wide because a
 * plugin is: dlopen hands back the same library, and a second Initialize is
 * not promised to be harmless. Callers serialize tpu_pjrt_open. */
static const PJRT_Api* initialized_plugins[16];
static int initialized_plugin_count;

static tpu_status initialize_once(const PJRT_Api* api) {
  for (int i = 0; i < initialized_plugin_count; i++)
    if (initialized_plugins[i] == api) return NULL;
  PJRT_Plugin_Initialize_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Plugin_Initialize(&args),
                                     "PJRT_Plugin_Initialize"));
  if (initialized_plugin_count < (int)(sizeof initialized_plugins / sizeof initialized_plugins[0]))
    initialized_plugins[initialized_plugin_count++] = api;
  return NULL;
}

static char* copy_string(const char* text, size_t size) {
  char* copy = malloc(size + 1);
  if (!copy) return NULL;
  if (size) memcpy(copy, text, size);
  copy[size] = '\0';
  return copy;
}

/* Formats an attribute value as text: xla_version is an int64 on the plugins
 * seen so far, but nothing promises it stays one. */
static char* named_value_text(const PJRT_NamedValue* value) {
  char text[256];
  text[0] = '\0';
  switch (value->type) {
    case PJRT_NamedValue_kString:
      return copy_string(value->string_value, value->value_size);
    case PJRT_NamedValue_kInt64:
      snprintf(text, sizeof text, "%" PRId64, value->int64_value);
      break;
    case PJRT_NamedValue_kInt64List: {
      size_t used = 0;
      for (size_t i = 0; i < value->value_size && used < sizeof text - 24; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%" PRId64, i ? "." : "",
                                 value->int64_array_value[i]);
      break;
    }
    case PJRT_NamedValue_kFloat:
      snprintf(text, sizeof text, "%g", (double)value->float_value);
      break;
    case PJRT_NamedValue_kBool:
      snprintf(text, sizeof text, "%s", value->bool_value ? "true" : "false");
      break;
  }
  return copy_string(text, strlen(text));
}

static tpu_status read_xla_version(tpu_pjrt* pjrt) {
  const PJRT_Api* api = pjrt->api;
  const PJRT_NamedValue* found = NULL;
  if (TPU_PJRT_HAS(api, PJRT_Plugin_Attributes)) {
    PJRT_Plugin_Attributes_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = PJRT_Plugin_Attributes_Args_STRUCT_SIZE;
    TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Plugin_Attributes(&args),
                                       "PJRT_Plugin_Attributes"));
    for (size_t i = 0; i < args.num_attributes; i++) {
      const PJRT_NamedValue* a = &args.attributes[i];
      if (a->name && a->name_size == strlen("xla_version") &&
          memcmp(a->name, "xla_version", a->name_size) == 0)
        found = a;
    }
  }
  pjrt->xla_version = found ? named_value_text(found) : copy_string("", 0);
  return pjrt->xla_version ? NULL : TPU_ERROR(TPU_OUT_OF_MEMORY, "copying xla_version");
}

static tpu_status create_client(tpu_pjrt* pjrt, const tpu_pjrt_options* options) {
  const PJRT_Api* api = pjrt->api;
  /* Sent only when asked for: a plugin may reject options it does not know. */
  PJRT_NamedValue device_count;
  memset(&device_count, 0, sizeof device_count);
  device_count.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  device_count.name = "cpu_device_count";
  device_count.name_size = strlen(device_count.name);
  device_count.type = PJRT_NamedValue_kInt64;
  device_count.int64_value = options->cpu_device_count;
  device_count.value_size = 1;

  PJRT_Client_Create_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  if (options->cpu_device_count > 0) {
    args.create_options = &device_count;
    args.num_options = 1;
  }
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Client_Create(&args), "PJRT_Client_Create"));
  pjrt->client = args.client;
  return NULL;
}

static tpu_status read_platform(tpu_pjrt* pjrt) {
  const PJRT_Api* api = pjrt->api;
  PJRT_Client_PlatformName_Args name;
  memset(&name, 0, sizeof name);
  name.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE;
  name.client = pjrt->client;
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Client_PlatformName(&name),
                                     "PJRT_Client_PlatformName"));
  pjrt->platform_name = copy_string(name.platform_name, name.platform_name_size);

  PJRT_Client_PlatformVersion_Args version;
  memset(&version, 0, sizeof version);
  version.struct_size = PJRT_Client_PlatformVersion_Args_STRUCT_SIZE;
  version.client = pjrt->client;
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Client_PlatformVersion(&version),
                                     "PJRT_Client_PlatformVersion"));
  pjrt->platform_version = copy_string(version.platform_version, version.platform_version_size);
  if (!pjrt->platform_name || !pjrt->platform_version)
    return TPU_ERROR(TPU_OUT_OF_MEMORY, "copying the platform name and version");
  return NULL;
}

/* A device's kind, or "" when the plugin cannot describe it. */
static char* device_kind(const PJRT_Api* api, PJRT_Device* device) {
  if (!TPU_PJRT_HAS(api, PJRT_Device_GetDescription) ||
      !TPU_PJRT_HAS(api, PJRT_DeviceDescription_Kind))
    return copy_string("", 0);
  PJRT_Device_GetDescription_Args desc;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE;
  desc.device = device;
  PJRT_Error* error = api->PJRT_Device_GetDescription(&desc);
  if (error) {
    tpu_pjrt_error_drop(api, error);
    return copy_string("", 0);
  }
  PJRT_DeviceDescription_Kind_Args kind;
  memset(&kind, 0, sizeof kind);
  kind.struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE;
  kind.device_description = desc.device_description;
  error = api->PJRT_DeviceDescription_Kind(&kind);
  if (error) {
    tpu_pjrt_error_drop(api, error);
    return copy_string("", 0);
  }
  return copy_string(kind.device_kind, kind.device_kind_size);
}

static tpu_status read_devices(tpu_pjrt* pjrt) {
  const PJRT_Api* api = pjrt->api;
  PJRT_Client_AddressableDevices_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  args.client = pjrt->client;
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Client_AddressableDevices(&args),
                                     "PJRT_Client_AddressableDevices"));
  if (args.num_addressable_devices == 0)
    return TPU_ERROR(TPU_NOT_FOUND, "PJRT plugin %s has no addressable devices", pjrt->plugin_path);
  pjrt->devices = args.addressable_devices;
  pjrt->device_kinds = calloc(args.num_addressable_devices, sizeof(char*));
  if (!pjrt->device_kinds) return TPU_ERROR(TPU_OUT_OF_MEMORY, "listing devices");
  /* Counted one by one so close frees exactly what was made. */
  for (size_t i = 0; i < args.num_addressable_devices; i++) {
    pjrt->device_kinds[i] = device_kind(api, args.addressable_devices[i]);
    if (!pjrt->device_kinds[i]) return TPU_ERROR(TPU_OUT_OF_MEMORY, "copying device kinds");
    pjrt->device_count++;
  }
  return NULL;
}

/* Slots every tpu_pjrt call relies on; the optional ones are checked where used. */
static tpu_status check_required_slots(const PJRT_Api* api, const char* path) {
#define REQUIRE(slot) \
  if (!TPU_PJRT_HAS(api, slot)) missing = #slot;
  const char* missing = NULL;
  REQUIRE(PJRT_Error_Destroy) REQUIRE(PJRT_Error_Message) REQUIRE(PJRT_Error_GetCode)
  REQUIRE(PJRT_Plugin_Initialize) REQUIRE(PJRT_Event_Destroy) REQUIRE(PJRT_Event_Await)
  REQUIRE(PJRT_Client_Create) REQUIRE(PJRT_Client_Destroy) REQUIRE(PJRT_Client_PlatformName)
  REQUIRE(PJRT_Client_PlatformVersion) REQUIRE(PJRT_Client_AddressableDevices)
  REQUIRE(PJRT_Client_Compile) REQUIRE(PJRT_Client_BufferFromHostBuffer)
  REQUIRE(PJRT_Executable_Destroy) REQUIRE(PJRT_Executable_NumOutputs)
  REQUIRE(PJRT_LoadedExecutable_Destroy) REQUIRE(PJRT_LoadedExecutable_GetExecutable)
  REQUIRE(PJRT_LoadedExecutable_Execute) REQUIRE(PJRT_Buffer_Destroy)
  REQUIRE(PJRT_Buffer_Dimensions) REQUIRE(PJRT_Buffer_ToHostBuffer)
  REQUIRE(PJRT_Buffer_ReadyEvent)
#undef REQUIRE
  if (missing)
    return TPU_ERROR(TPU_UNIMPLEMENTED, "PJRT plugin %s (C API %d.%d) does not provide %s", path,
                     api->pjrt_api_version.major_version, api->pjrt_api_version.minor_version,
                     missing);
  return NULL;
}

/* The oldest plugin minor version whose API table matches our header's layout. */
#define MIN_API_MINOR 57

/* dlopen + GetPjrtApi + version and table checks. */
static tpu_status load_api(const char* path, const PJRT_Api** out_api) {
  *out_api = NULL;
  /* Never dlclosed: plugins keep static registries that must not unload. */
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    if (access(path, F_OK) != 0)
      return TPU_ERROR(TPU_NOT_FOUND, "PJRT plugin not found: %s (%s)", path, why ? why : "");
    return TPU_ERROR(TPU_NOT_FOUND, "PJRT plugin %s could not be loaded: %s", path,
                     why ? why : "unknown dlopen error");
  }
  typedef const PJRT_Api* (*get_api_fn)(void);
  get_api_fn get_api = (get_api_fn)dlsym(handle, "GetPjrtApi");
  if (!get_api)
    return TPU_ERROR(TPU_NOT_FOUND, "%s is not a PJRT plugin: no GetPjrtApi symbol", path);
  const PJRT_Api* api = get_api();
  if (!api) return TPU_ERROR(TPU_PLUGIN_ERROR, "GetPjrtApi of %s returned NULL", path);
  size_t version_end = offsetof(PJRT_Api, pjrt_api_version) + sizeof api->pjrt_api_version;
  if (api->struct_size < version_end)
    return TPU_ERROR(TPU_PLUGIN_ERROR, "PJRT plugin %s reports a %zu-byte API table, too small",
                     path, api->struct_size);
  /* From 0.57 on, minor versions work both ways: struct_size tells each side
   * what the other knows (a 0.115 plugin runs with our 0.81 header). */
  if (api->pjrt_api_version.major_version != PJRT_API_MAJOR)
    return TPU_ERROR(TPU_UNIMPLEMENTED,
                     "PJRT plugin %s has C API %d.%d; torch_tpu is built for %d.%d", path,
                     api->pjrt_api_version.major_version, api->pjrt_api_version.minor_version,
                     PJRT_API_MAJOR, PJRT_API_MINOR);
  /* 0.57 reordered the PJRT_Api table within major 0: older plugins' slots
   * sit at other offsets than our header's. */
  if (api->pjrt_api_version.minor_version < MIN_API_MINOR)
    return TPU_ERROR(TPU_UNIMPLEMENTED,
                     "PJRT plugin %s has C API %d.%d; torch_tpu needs %d.%d or newer", path,
                     api->pjrt_api_version.major_version, api->pjrt_api_version.minor_version,
                     PJRT_API_MAJOR, MIN_API_MINOR);
  TPU_RETURN_IF_ERROR(check_required_slots(api, path));
  *out_api = api;
  return NULL;
}

tpu_status tpu_pjrt_open(const tpu_pjrt_options* options, tpu_pjrt** out_pjrt) {
  if (!out_pjrt) return TPU_ERROR(TPU_INVALID_ARGUMENT, "tpu_pjrt_open: out_pjrt is NULL");
  *out_pjrt = NULL;
  if (!options || !options->plugin_path || !options->plugin_path[0])
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "tpu_pjrt_open: no plugin_path given");
  if (options->cpu_device_count < 0)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "tpu_pjrt_open: cpu_device_count is %d, must be >= 0",
                     options->cpu_device_count);

  if (options->worker_nice < 0)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "tpu_pjrt_open: worker_nice is %d, must be >= 0",
                     options->worker_nice);

  /* The threads before the plugin starts its own (listed only when they
   * are to be told apart). */
  tpu_thread_ids before = {0};
  if (options->worker_nice > 0) tpu_thread_ids_snapshot(&before);
  const PJRT_Api* api;
  tpu_status status = load_api(options->plugin_path, &api);
  if (!status) status = initialize_once(api);
  tpu_pjrt* pjrt = status ? NULL : calloc(1, sizeof *pjrt);
  if (!status && !pjrt) status = TPU_ERROR(TPU_OUT_OF_MEMORY, "allocating tpu_pjrt");
  if (status) {
    tpu_thread_ids_free(&before);
    return status;
  }
  pjrt->api = api;
  pjrt->plugin_path = copy_string(options->plugin_path, strlen(options->plugin_path));
  if (!pjrt->plugin_path) {
    status = TPU_ERROR(TPU_OUT_OF_MEMORY, "copying the plugin path");
    goto fail;
  }
  if ((status = read_xla_version(pjrt))) goto fail;
  if (options->keep_freed_memory) pjrt->keeps_freed_memory = tpu_host_memory_keep_freed();
  if ((status = create_client(pjrt, options))) goto fail;
  if ((status = read_platform(pjrt))) goto fail;
  if ((status = read_devices(pjrt))) goto fail;
  /* The device is the host only on the CPU platform. */
  if (strcmp(pjrt->platform_name, "cpu") == 0) {
    if (options->worker_nice > 0)
      pjrt->lowered_threads = tpu_threads_lower_priority_since(&before, options->worker_nice);
  }
  tpu_thread_ids_free(&before);
  *out_pjrt = pjrt;
  return NULL;

fail:
  tpu_thread_ids_free(&before);
  tpu_pjrt_close(pjrt);
  return tpu_status_annotate(status, "opening PJRT plugin %s: ", options->plugin_path);
}

void tpu_pjrt_close(tpu_pjrt* pjrt) {
  if (!pjrt) return;
  if (pjrt->client) {
    PJRT_Client_Destroy_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
    args.client = pjrt->client;
    /* Nobody can act on a failed destroy; the error is released, not reported. */
    tpu_pjrt_error_drop(pjrt->api, pjrt->api->PJRT_Client_Destroy(&args));
  }
  for (int i = 0; i < pjrt->device_count; i++) free(pjrt->device_kinds[i]);
  free(pjrt->device_kinds);
  free(pjrt->plugin_path);
  free(pjrt->platform_name);
  free(pjrt->platform_version);
  free(pjrt->xla_version);
  free(pjrt);
}

/* ---- queries; "" or 0 for a NULL pjrt so logging code never crashes ---- */

const char* tpu_pjrt_plugin_path(const tpu_pjrt* pjrt) { return pjrt ? pjrt->plugin_path : ""; }
const char* tpu_pjrt_platform_name(const tpu_pjrt* pjrt) { return pjrt ? pjrt->platform_name : ""; }
bool tpu_pjrt_buffers_shape_free(const tpu_pjrt* pjrt) {
  return strcmp(tpu_pjrt_platform_name(pjrt), "cpu") == 0;
}
const char* tpu_pjrt_platform_version(const tpu_pjrt* pjrt) {
  return pjrt ? pjrt->platform_version : "";
}
const char* tpu_pjrt_xla_version(const tpu_pjrt* pjrt) { return pjrt ? pjrt->xla_version : ""; }
int tpu_pjrt_api_major(const tpu_pjrt* pjrt) {
  return pjrt ? pjrt->api->pjrt_api_version.major_version : 0;
}
int tpu_pjrt_api_minor(const tpu_pjrt* pjrt) {
  return pjrt ? pjrt->api->pjrt_api_version.minor_version : 0;
}
int tpu_pjrt_device_count(const tpu_pjrt* pjrt) { return pjrt ? pjrt->device_count : 0; }
int tpu_pjrt_lowered_threads(const tpu_pjrt* pjrt) { return pjrt ? pjrt->lowered_threads : 0; }
bool tpu_pjrt_keeps_freed_memory(const tpu_pjrt* pjrt) { return pjrt && pjrt->keeps_freed_memory; }
const char* tpu_pjrt_device_kind(const tpu_pjrt* pjrt, int device) {
  if (!pjrt || device < 0 || device >= pjrt->device_count) return "";
  return pjrt->device_kinds[device];
}

tpu_status tpu_pjrt_device_memory(tpu_pjrt* pjrt, int device, int64_t* out_free, int64_t* out_total) {
  *out_free = *out_total = 0;
  if (!pjrt || device < 0 || device >= pjrt->device_count)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "no tpu:%d to report memory for", device);
  const PJRT_Api* api = pjrt->api;
  if (TPU_PJRT_HAS(api, PJRT_Device_MemoryStats)) {
    PJRT_Device_MemoryStats_Args stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = PJRT_Device_MemoryStats_Args_STRUCT_SIZE;
    stats.device = pjrt->devices[device];
    PJRT_Error* error = api->PJRT_Device_MemoryStats(&stats);
    if (error) {
      tpu_pjrt_error_drop(api, error); /* unimplemented on some plugins: the host's figures below */
    } else if (stats.bytes_limit_is_set) {
      *out_total = stats.bytes_limit;
      *out_free = stats.bytes_limit > stats.bytes_in_use ? stats.bytes_limit - stats.bytes_in_use : 0;
      return NULL;
    }
  }
  if (strcmp(pjrt->platform_name, "cpu") == 0) return tpu_host_memory_size(out_free, out_total);
  return TPU_ERROR(TPU_UNIMPLEMENTED, "the %s plugin (%s) reports no memory limit for tpu:%d",
                   pjrt->platform_name, pjrt->plugin_path, device);
}

void tpu_pjrt_release_freed_memory(tpu_pjrt* pjrt) {
  if (pjrt && pjrt->keeps_freed_memory) tpu_host_memory_release();
}
