"""Loading libaccel and describing its C ABI to ctypes.

The library is found, in order, at $ACCEL_LIBRARY, by the system's library
search (``ctypes.util.find_library('accel')``), or as ``libaccel.so.0``.
Struct layouts mirror include/accel/core.h; they only ever grow at the end.
"""
import ctypes
import ctypes.util
import os

ABI_VERSION = 0

c_status = ctypes.c_int
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double)

MAX_DIMS = 8
STAGE_NAME_MAX = 48
DEVICE_NAME_MAX = 256
REASON_MAX = 256


class CtxOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("backend", ctypes.c_int),
        ("device", ctypes.c_int32),
        ("fallback", ctypes.c_int),
        ("device_memory_budget", ctypes.c_uint64),
        ("cpu_threads", ctypes.c_int32),
        ("log_level", ctypes.c_int),
        ("log_fn", LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("max_pixels", ctypes.c_uint64),
    ]


class CtxInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("backend", ctypes.c_int),
        ("device", ctypes.c_int32),
        ("fallback", ctypes.c_int),
        ("device_memory_budget", ctypes.c_uint64),
        ("cpu_threads", ctypes.c_int32),
        ("log_level", ctypes.c_int),
        ("max_pixels", ctypes.c_uint64),
    ]


class StageStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("stage", ctypes.c_char * STAGE_NAME_MAX),
        ("runs", ctypes.c_uint64),
        ("gpu_runs", ctypes.c_uint64),
        ("cpu_runs", ctypes.c_uint64),
        ("fallbacks", ctypes.c_uint64),
        ("failures", ctypes.c_uint64),
        ("seconds", ctypes.c_double),
    ]


class BackendInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int),
        ("name", ctypes.c_char * 16),
        ("compiled", ctypes.c_int32),
        ("available", ctypes.c_int32),
        ("device_count", ctypes.c_int32),
        ("reason", ctypes.c_char * REASON_MAX),
    ]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("index", ctypes.c_int32),
        ("name", ctypes.c_char * DEVICE_NAME_MAX),
        ("total_memory", ctypes.c_uint64),
        ("free_memory", ctypes.c_uint64),
        ("cc_major", ctypes.c_int32),
        ("cc_minor", ctypes.c_int32),
        ("multiprocessors", ctypes.c_int32),
        ("driver_version", ctypes.c_int32),
        ("runtime_version", ctypes.c_int32),
    ]


HASH_KIND_COUNT = 6
HASH_ERROR_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p)


class HashOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("nkinds", ctypes.c_uint32),
        ("kinds", ctypes.c_int * HASH_KIND_COUNT),
        ("hash_size", ctypes.c_int32),
        ("color_binbits", ctypes.c_int32),
        ("fast", ctypes.c_int32),
        ("max_pixels", ctypes.c_uint64),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
        ("on_error", HASH_ERROR_FN),
        ("error_user", ctypes.c_void_p),
    ]


INDEX_MAX_FIELDS = 8


class IndexOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("bits", ctypes.c_uint32),
        ("nfields", ctypes.c_uint32),
    ]


class SearchOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rule", ctypes.c_int),
        ("thresholds", ctypes.c_uint32 * INDEX_MAX_FIELDS),
        ("algorithm", ctypes.c_int),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
    ]


class CtMarkerOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("min_distance", ctypes.c_int32),
        ("smooth_sigma", ctypes.c_double),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
        ("trim", ctypes.c_uint32),
        ("saddle_iterations", ctypes.c_int32),
        ("nearby_factor", ctypes.c_double),
        ("spacing", ctypes.c_double * 3),
    ]


class SvfOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("pixel_size", ctypes.c_double),
        ("patches", ctypes.c_int32),
        ("trunk_ratio", ctypes.c_double),
        ("max_height", ctypes.c_double),
        ("tile", ctypes.c_int64),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
    ]


class CtWatershedOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("ties", ctypes.c_int),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
    ]


class CtRegion(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("label", ctypes.c_uint32),
        ("voxels", ctypes.c_uint64),
        ("volume", ctypes.c_double),
        ("equivalent_radius", ctypes.c_double),
        ("centroid", ctypes.c_double * 3),
        ("inscribed_radius", ctypes.c_double),
    ]


class CtThroat(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("a", ctypes.c_uint32),
        ("b", ctypes.c_uint32),
        ("faces", ctypes.c_uint64),
        ("area", ctypes.c_double),
        ("inscribed_radius", ctypes.c_double),
    ]


class CtPipelineOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("slope", ctypes.POINTER(ctypes.c_double)),
        ("intercept", ctypes.POINTER(ctypes.c_double)),
        ("threshold", ctypes.c_double),
        ("compare", ctypes.c_int),
        ("fill_connectivity", ctypes.c_int),
        ("pores", ctypes.c_int),
        ("spacing", ctypes.c_double * 3),
        ("min_distance", ctypes.c_int32),
        ("smooth_sigma", ctypes.c_double),
        ("ties", ctypes.c_int),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
        ("trim", ctypes.c_uint32),
        ("saddle_iterations", ctypes.c_int32),
        ("nearby_factor", ctypes.c_double),
    ]


class CtOutputs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("solid", ctypes.c_void_p),
        ("filled", ctypes.c_void_p),
        ("pores", ctypes.c_void_p),
        ("edt", ctypes.c_void_p),
        ("markers", ctypes.c_void_p),
        ("labels", ctypes.c_void_p),
        ("network", ctypes.POINTER(ctypes.c_void_p)),
        ("marker_count", ctypes.c_uint32),
    ]


class DecodeOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("target", ctypes.c_int),
        ("max_pixels", ctypes.c_uint64),
    ]


class ImageInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("format", ctypes.c_int),
        ("mode", ctypes.c_int),
        ("width", ctypes.c_int64),
        ("height", ctypes.c_int64),
    ]


class Array(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]

# Each ctypes struct and the C type it mirrors; the binding tests compare
# their sizes and every field's offset with the C declarations.
C_NAMES = {
    CtxOptions: "accel_ctx_options", CtxInfo: "accel_ctx_info", StageStats: "accel_stage_stats",
    BackendInfo: "accel_backend_info", DeviceInfo: "accel_device_info", HashOptions: "accel_hash_options",
    IndexOptions: "accel_index_options", SearchOptions: "accel_search_options",
    CtMarkerOptions: "accel_ct_marker_options", SvfOptions: "accel_svf_options",
    CtWatershedOptions: "accel_ct_watershed_options", CtRegion: "accel_ct_region", CtThroat: "accel_ct_throat",
    CtPipelineOptions: "accel_ct_pipeline_options", CtOutputs: "accel_ct_outputs",
    DecodeOptions: "accel_decode_options", ImageInfo: "accel_image_info", Array: "accel_array",
}


def _load():
    candidates = []
    if os.environ.get("ACCEL_LIBRARY"):
        candidates.append(os.environ["ACCEL_LIBRARY"])
    found = ctypes.util.find_library("accel")
    if found:
        candidates.append(found)
    candidates.append("libaccel.so.%d" % ABI_VERSION)
    errors = []
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("cannot load libaccel (set ACCEL_LIBRARY to its path): " + "; ".join(errors))


lib = _load()

_P = ctypes.POINTER
_SIGNATURES = {
    "accel_version_number": (ctypes.c_uint32, []),
    "accel_version_string": (ctypes.c_char_p, []),
    "accel_abi_version": (ctypes.c_uint32, []),
    "accel_build_info": (ctypes.c_char_p, []),
    "accel_status_string": (ctypes.c_char_p, [c_status]),
    "accel_status_describe": (ctypes.c_char_p, [c_status]),
    "accel_ctx_options_init": (c_status, [_P(CtxOptions), ctypes.c_size_t]),
    "accel_ctx_create": (c_status, [_P(CtxOptions), _P(ctypes.c_void_p)]),
    "accel_ctx_destroy": (None, [ctypes.c_void_p]),
    "accel_last_error": (ctypes.c_char_p, [ctypes.c_void_p]),
    "accel_set_log": (c_status, [ctypes.c_void_p, LOG_FN, ctypes.c_void_p, ctypes.c_int]),
    "accel_ctx_info_init": (c_status, [_P(CtxInfo), ctypes.c_size_t]),
    "accel_ctx_query": (c_status, [ctypes.c_void_p, _P(CtxInfo)]),
    "accel_stage_stats_init": (c_status, [_P(StageStats), ctypes.c_size_t]),
    "accel_ctx_stats_count": (c_status, [ctypes.c_void_p, _P(ctypes.c_size_t)]),
    "accel_ctx_stats_get": (c_status, [ctypes.c_void_p, ctypes.c_size_t, _P(StageStats)]),
    "accel_ctx_stats_reset": (c_status, [ctypes.c_void_p]),
    "accel_backend_info_init": (c_status, [_P(BackendInfo), ctypes.c_size_t]),
    "accel_backend_query": (c_status, [ctypes.c_int, _P(BackendInfo)]),
    "accel_device_info_init": (c_status, [_P(DeviceInfo), ctypes.c_size_t]),
    "accel_device_count": (c_status, [_P(ctypes.c_int32)]),
    "accel_device_query": (c_status, [ctypes.c_int32, _P(DeviceInfo)]),
    "accel_backend_from_string": (c_status, [ctypes.c_char_p, _P(ctypes.c_int)]),
    "accel_log_level_from_string": (c_status, [ctypes.c_char_p, _P(ctypes.c_int)]),
    "accel_image_to_gray": (c_status, [ctypes.c_void_p, _P(Array), _P(Array)]),
    "accel_hash_options_init": (c_status, [_P(HashOptions), ctypes.c_size_t]),
    "accel_hash_kind_from_string": (c_status, [ctypes.c_char_p, _P(ctypes.c_int)]),
    "accel_hash_bits": (c_status, [ctypes.c_int, ctypes.c_int32, ctypes.c_int32, _P(ctypes.c_uint32)]),
    "accel_hash_slot_bytes": (c_status, [_P(HashOptions), _P(ctypes.c_size_t)]),
    "accel_hash_files": (c_status, [ctypes.c_void_p, _P(ctypes.c_char_p), ctypes.c_size_t, _P(HashOptions),
                                    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]),
    "accel_hash_buffers": (c_status, [ctypes.c_void_p, _P(ctypes.c_void_p), _P(ctypes.c_size_t), ctypes.c_size_t,
                                      _P(HashOptions), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]),
    "accel_hash_arrays": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_size_t, _P(HashOptions),
                                     ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]),
    "accel_hash_to_hex": (c_status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]),
    "accel_hash_from_hex": (c_status, [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]),
    "accel_hash_distance": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, _P(ctypes.c_uint32)]),
    "accel_decode_options_init": (c_status, [_P(DecodeOptions), ctypes.c_size_t]),
    "accel_image_info_init": (c_status, [_P(ImageInfo), ctypes.c_size_t]),
    "accel_image_mode_name": (ctypes.c_char_p, [ctypes.c_int]),
    "accel_image_decode_file": (c_status, [ctypes.c_void_p, ctypes.c_char_p, _P(DecodeOptions),
                                           _P(ctypes.c_void_p), _P(ImageInfo)]),
    "accel_image_decode_buffer": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                             _P(DecodeOptions), _P(ctypes.c_void_p), _P(ImageInfo)]),
    "accel_buffer_view": (c_status, [ctypes.c_void_p, _P(Array)]),
    "accel_buffer_destroy": (None, [ctypes.c_void_p]),
    "accel_index_options_init": (c_status, [_P(IndexOptions), ctypes.c_size_t]),
    "accel_index_create": (c_status, [ctypes.c_void_p, _P(IndexOptions), _P(ctypes.c_void_p)]),
    "accel_index_destroy": (None, [ctypes.c_void_p]),
    "accel_index_info": (c_status, [ctypes.c_void_p, _P(ctypes.c_uint32), _P(ctypes.c_uint32),
                                    _P(ctypes.c_size_t)]),
    "accel_index_add": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
                                   _P(ctypes.c_char_p), ctypes.c_void_p]),
    "accel_index_remove": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, _P(ctypes.c_size_t)]),
    "accel_index_get": (c_status, [ctypes.c_void_p, ctypes.c_size_t, _P(ctypes.c_uint64), ctypes.c_void_p,
                                   _P(ctypes.c_char_p), _P(ctypes.c_uint64)]),
    "accel_index_find": (c_status, [ctypes.c_void_p, ctypes.c_uint64, _P(ctypes.c_size_t)]),
    "accel_index_set_meta": (c_status, [ctypes.c_void_p, ctypes.c_char_p]),
    "accel_index_get_meta": (c_status, [ctypes.c_void_p, _P(ctypes.c_char_p)]),
    "accel_index_save": (c_status, [ctypes.c_void_p, ctypes.c_char_p]),
    "accel_index_load": (c_status, [ctypes.c_void_p, ctypes.c_char_p, _P(ctypes.c_void_p)]),
    "accel_search_options_init": (c_status, [_P(SearchOptions), ctypes.c_size_t]),
    "accel_index_self_join": (c_status, [ctypes.c_void_p, _P(SearchOptions), _P(ctypes.c_void_p)]),
    "accel_index_range": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, _P(SearchOptions),
                                     _P(ctypes.c_void_p)]),
    "accel_index_knn": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_uint32,
                                   ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]),
    "accel_pairs_view": (c_status, [ctypes.c_void_p, _P(ctypes.c_size_t), _P(ctypes.c_void_p),
                                    _P(ctypes.c_void_p), _P(ctypes.c_void_p), _P(ctypes.c_uint32)]),
    "accel_pairs_destroy": (None, [ctypes.c_void_p]),
    "accel_groups_from_pairs": (c_status, [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, _P(ctypes.c_void_p)]),
    "accel_index_group": (c_status, [ctypes.c_void_p, _P(SearchOptions), _P(ctypes.c_void_p)]),
    "accel_groups_view": (c_status, [ctypes.c_void_p, _P(ctypes.c_size_t), _P(ctypes.c_void_p),
                                     _P(ctypes.c_void_p)]),
    "accel_groups_destroy": (None, [ctypes.c_void_p]),
    "accel_ct_rescale": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_void_p, ctypes.c_void_p, _P(Array)]),
    "accel_ct_threshold": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_double, ctypes.c_int, _P(Array)]),
    "accel_ct_fill_holes": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_int, _P(Array)]),
    "accel_ct_edt": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_void_p, _P(Array)]),
    "accel_ct_marker_options_init": (c_status, [_P(CtMarkerOptions), ctypes.c_size_t]),
    "accel_ct_trim_markers": (c_status, [ctypes.c_void_p, _P(Array), _P(Array), _P(CtMarkerOptions), _P(Array),
                                         ctypes.POINTER(ctypes.c_uint32)]),
    "accel_ct_markers": (c_status, [ctypes.c_void_p, _P(Array), _P(Array), _P(CtMarkerOptions), _P(Array),
                                    _P(ctypes.c_uint32)]),
    "accel_ct_watershed_options_init": (c_status, [_P(CtWatershedOptions), ctypes.c_size_t]),
    "accel_ct_watershed": (c_status, [ctypes.c_void_p, _P(Array), _P(Array), ctypes.c_void_p,
                                      _P(CtWatershedOptions), _P(Array)]),
    "accel_svf_options_init": (c_status, [_P(SvfOptions), ctypes.c_size_t]),
    "accel_svf_patches": (ctypes.c_int, [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    "accel_svf_grid_name": (ctypes.c_char_p, [ctypes.c_int32]),
    "accel_svf_shadows": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double,
                                     ctypes.c_double, _P(SvfOptions), _P(Array), ctypes.c_void_p, ctypes.c_void_p]),
    "accel_svf_sky": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_void_p, ctypes.c_void_p, _P(SvfOptions),
                                 ctypes.c_void_p, ctypes.c_void_p]),
    "accel_ct_network_build": (c_status, [ctypes.c_void_p, _P(Array), _P(Array), ctypes.c_void_p,
                                          _P(ctypes.c_void_p)]),
    "accel_ct_network_info": (c_status, [ctypes.c_void_p, _P(ctypes.c_size_t), _P(ctypes.c_size_t),
                                         _P(ctypes.c_double)]),
    "accel_ct_network_region": (c_status, [ctypes.c_void_p, ctypes.c_size_t, _P(CtRegion)]),
    "accel_ct_network_throat": (c_status, [ctypes.c_void_p, ctypes.c_size_t, _P(CtThroat)]),
    "accel_ct_network_destroy": (None, [ctypes.c_void_p]),
    "accel_ct_pipeline_options_init": (c_status, [_P(CtPipelineOptions), ctypes.c_size_t]),
    "accel_ct_outputs_init": (c_status, [_P(CtOutputs), ctypes.c_size_t]),
    "accel_ct_pipeline_create": (c_status, [ctypes.c_void_p, _P(CtPipelineOptions), _P(ctypes.c_void_p)]),
    "accel_ct_pipeline_destroy": (None, [ctypes.c_void_p]),
    "accel_ct_pipeline_run": (c_status, [ctypes.c_void_p, _P(Array), ctypes.c_void_p, _P(CtOutputs)]),
    "accel_raw_load": (c_status, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int32,
                                  _P(ctypes.c_int64), ctypes.c_uint64, _P(ctypes.c_void_p)]),
    "accel_raw_save": (c_status, [ctypes.c_void_p, ctypes.c_char_p, _P(Array)]),
}
for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

if lib.accel_abi_version() != ABI_VERSION:
    raise ImportError(
        "libaccel ABI %d found, this package speaks ABI %d" % (lib.accel_abi_version(), ABI_VERSION))
