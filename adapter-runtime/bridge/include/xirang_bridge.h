/* The C ABI of xirang-bridge (adapter-runtime/bridge/src/ffi.rs): what PyTorch's device shim
 * (adapter-runtime/torch-xirang/csrc/) calls. Hand-written; adapter-runtime/bridge/tests/header.rs
 * checks it against the Rust side (every constant, every exported function).
 *
 * Conventions. Every function returning int32_t returns an XR_* status; on failure
 * xirang_last_error() is the calling thread's message (valid until its next call). Device indices
 * are PyTorch's (after XIRANG_VISIBLE_DEVICES); -1 means the calling thread's current device.
 * Out-pointers must be valid and writable. No function unwinds: a panic is XR_PANIC. */
#ifndef XIRANG_BRIDGE_H
#define XIRANG_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* status codes */
#define XR_OK 0
#define XR_DECLINED 1        /* no device implementation for these arguments: run the CPU fallback */
#define XR_ERROR 2           /* RuntimeError */
#define XR_OUT_OF_MEMORY 3   /* torch.OutOfMemoryError */
#define XR_INDEX 4           /* IndexError */
#define XR_VALUE 5           /* ValueError */
#define XR_TYPE 6            /* TypeError */
#define XR_NOT_IMPLEMENTED 7 /* NotImplementedError */
#define XR_PANIC 8           /* a bug in the runtime: RuntimeError */

/* XrValue tags */
#define XR_TAG_NONE 0
#define XR_TAG_TENSOR 1          /* p: XrTensor*, len 1 */
#define XR_TAG_TENSOR_LIST 2     /* p: XrTensor[len] */
#define XR_TAG_OPT_TENSOR_LIST 3 /* p: XrTensor[len]; dtype -1 = None */
#define XR_TAG_INT 4             /* i */
#define XR_TAG_INT_LIST 5        /* p: int64_t[len] */
#define XR_TAG_FLOAT 6           /* f */
#define XR_TAG_FLOAT_LIST 7      /* p: double[len] */
#define XR_TAG_BOOL 8            /* i */
#define XR_TAG_BOOL_LIST 9       /* p: uint8_t[len] */
#define XR_TAG_SCALAR_INT 10     /* i */
#define XR_TAG_SCALAR_FLOAT 11   /* f */
#define XR_TAG_SCALAR_BOOL 12    /* i */
#define XR_TAG_SCALAR_LIST 13    /* p: XrValue[len] of scalar tags */
#define XR_TAG_STR 14            /* p: UTF-8 bytes[len] */
#define XR_TAG_DTYPE 15          /* i: c10::ScalarType */
#define XR_TAG_LAYOUT 16         /* i: c10::Layout */
#define XR_TAG_MEMORY_FORMAT 17  /* i: c10::MemoryFormat */
#define XR_TAG_DEVICE 18         /* i: xirang index, -1 = cpu */
#define XR_TAG_UNSUPPORTED 19    /* a value the runtime does not model: the call is declined */

#define XR_FLAG_MUTABLE 1        /* XrValue.flags: the operator writes this argument (schema Tensor(a!)) */
#define XR_FLAG_WRAPPED_NUMBER 2 /* XrValue.flags: a Python number PyTorch wrapped in a CPU tensor */

/* fallback modes (XIRANG_FALLBACK) */
#define XR_FALLBACK_ERROR 0
#define XR_FALLBACK_WARN 1
#define XR_FALLBACK_SILENT 2

/* A tensor: a view of a storage. Arguments: a xirang tensor names its storage by `storage` (a
 * handle from xirang_storage_alloc / xirang_storage_retain; `data` = its device address); a CPU
 * tensor has storage NULL, device -1 and data = the host address of its storage's first byte,
 * nbytes long. sizes/strides point at ndim values; offset is in elements; dtype is the
 * c10::ScalarType code (-1: an absent element of a Tensor?[]); itemsize its width in bytes.
 * Results: `storage` is borrowed until xirang_result_free (retain it to keep it); `alias` >= 0
 * names the argument (written by the operator) whose storage the result is, storage is then
 * NULL; a CPU result (device -1) has data = its contiguous bytes. */
typedef struct XrTensor {
  void* storage;
  uint64_t data;
  uint64_t nbytes;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t ndim;
  int64_t offset;
  int32_t dtype;
  int32_t itemsize;
  int32_t device;
  int32_t alias;
} XrTensor;

typedef struct XrValue {
  int32_t tag;
  int32_t flags;
  int64_t i;
  double f;
  void* p;
  uint64_t len;
} XrValue;

typedef struct XrResult {
  XrValue* values;
  uint64_t len;
  void* owner;
} XrResult;

typedef struct XrMemoryStats {
  uint64_t allocated_bytes;
  uint64_t reserved_bytes;
  uint64_t peak_allocated_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t alloc_count;
  uint64_t free_count;
  uint64_t cache_hits;
  uint64_t device_mallocs;
  uint64_t device_frees;
  uint64_t oom_retries;
  uint64_t ooms;
} XrMemoryStats;

const char* xirang_last_error(void);
int32_t xirang_init(void);
int32_t xirang_device_count(void); /* never fails: 0 when the runtime cannot start */
int32_t xirang_current_device(int32_t* out);
int32_t xirang_set_device(int32_t index);

/* storages: handles own a reference; release each once */
int32_t xirang_storage_alloc(int32_t index, uint64_t nbytes, void** handle, uint64_t* data);
void* xirang_storage_retain(void* handle);
void xirang_storage_release(void* handle);

/* operators: op is the qualified name (add.Tensor), args in schema order */
int32_t xirang_call(const uint8_t* op, size_t op_len, const XrValue* args, size_t nargs, XrResult* out);
/* the operator's index for xirang_call_at (look it up once, call it many times); -1: unknown */
int64_t xirang_op_index(const uint8_t* op, size_t op_len);
int32_t xirang_call_at(int64_t index, const XrValue* args, size_t nargs, XrResult* out);
void xirang_result_free(XrResult* out);

/* copies (raw elements of the tensor's dtype, row-major) */
int32_t xirang_read(const XrTensor* src, uint8_t* dst, uint64_t nbytes);
int32_t xirang_write(const XrTensor* dst, const uint8_t* src, uint64_t nbytes);
/* between two xirang tensors, casting; XR_DECLINED for a cast from or to a dtype the runtime does not
   model (complex, the unsigned and float8 types), which the caller does on the host */
int32_t xirang_copy(const XrTensor* dst, const XrTensor* src);
/* bytes at a device address of device `index` that no runtime storage handle names (a tensor of
   at::from_blob over xirang memory, as torch's serialization makes): after the device's queued
   work, as cudaMemcpy; the driver refuses a range outside its allocations */
int32_t xirang_read_address(int32_t index, uint64_t addr, uint8_t* dst, uint64_t nbytes);
int32_t xirang_write_address(int32_t index, uint64_t addr, const uint8_t* src, uint64_t nbytes);

/* devices, streams (c10 stream ids), events (nonzero handles) */
int32_t xirang_synchronize(int32_t index); /* -2: every device */
int32_t xirang_stream_current(int32_t index, int64_t* out);
int32_t xirang_stream_set(int32_t index, int64_t stream);
int32_t xirang_stream_new(int32_t index, int64_t* out);
int32_t xirang_stream_synchronize(int32_t index, int64_t stream);
int32_t xirang_event_create(int32_t index, uint64_t* out);
int32_t xirang_event_record(int32_t index, uint64_t event, int64_t stream);
int32_t xirang_event_block(int32_t index, int64_t stream, uint64_t event);
int32_t xirang_event_synchronize(int32_t index, uint64_t event);
int32_t xirang_event_query(int32_t index, uint64_t event, int32_t* done); /* never waits */
int32_t xirang_event_elapsed(int32_t index, uint64_t start, uint64_t end, double* ms);
int32_t xirang_event_destroy(int32_t index, uint64_t event);

/* memory */
int32_t xirang_memory_stats(int32_t index, XrMemoryStats* out);
int32_t xirang_reset_peak_memory_stats(int32_t index);
int32_t xirang_reset_accumulated_memory_stats(int32_t index); /* event counts to 0; gauges stay */
int32_t xirang_mem_get_info(int32_t index, uint64_t* free, uint64_t* total);

/* in a forked child (os.register_at_fork): every later call fails, storages are not released */
void xirang_mark_forked(void);

/* pinned (page-locked) host memory of the driver, PyTorch's pin_memory() */
int32_t xirang_host_alloc(uint64_t size, uint64_t* out);
int32_t xirang_host_free(uint64_t addr);
int32_t xirang_host_is_pinned(uint64_t addr); /* 1 or 0 */
int32_t xirang_empty_cache(int32_t index);

/* fallback policy and counters */
int32_t xirang_fallback_admit(const uint8_t* op, size_t op_len);
int32_t xirang_forced_fallback(const uint8_t* op, size_t op_len); /* 1 or 0 */
int32_t xirang_set_fallback_mode(int32_t mode);
int32_t xirang_fallback_mode(void);
int32_t xirang_set_force_fallback(const uint8_t* ops, size_t len); /* comma-separated */
int32_t xirang_set_fallback_alert(uint64_t threshold);
char* xirang_counters_json(void); /* free with xirang_string_free */
void xirang_reset_counters(void);
void xirang_string_free(char* s);

int32_t xirang_manual_seed(uint64_t seed);
const char* xirang_pytorch_version(void); /* the version the operators were generated for */

#ifdef __cplusplus
}
#endif
#endif
