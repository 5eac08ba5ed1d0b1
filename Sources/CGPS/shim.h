#ifndef CGPS_SHIM_H
#define CGPS_SHIM_H

// libgps (Debian libgps-dev 3.22, GPSD_API_MAJOR_VERSION 11) for Swift. The 24 KB gps_data_t
// stays on the heap behind an opaque pointer; Swift gets one flat struct per message. Each helper
// says why it exists; API churn is guarded on GPSD_API_MAJOR_VERSION.
#include <errno.h>
#include <gps.h>
#include <stdio.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/// The class of the message just read. libgps's `set` mask keeps stale bits from earlier messages
/// (a SKY after a TPV still shows MODE_SET) unless it is cleared before each read, which
/// cgps_read does; and gps_data() is no help, as it shows the buffer after the parsed line (measured
/// on 3.22: the SKY that follows a TPV). So the class comes from the bits the read itself set.
enum cgps_class { CGPS_OTHER = 0, CGPS_TPV = 1, CGPS_SKY = 2, CGPS_VERSION = 3, CGPS_WATCH = 4, CGPS_DEVICE = 5, CGPS_ERROR = 6 };

/// One message, flattened: NaN where gpsd gave nothing.
typedef struct cgps_report {
    int report_class;
    /// One gps_read can unpack several messages that arrived together (a TPV and its SKY): these
    /// say which kinds this read held.
    bool has_tpv;
    bool has_sky;
    int mode;
    int status;
    bool has_time;
    int64_t time_seconds;      // since the epoch; exact, not a double (a double loses nanoseconds)
    int64_t time_nanoseconds;
    double latitude, longitude, alt_hae, alt_msl;
    double eph, epx, epy, epv, speed, track, climb;
    int satellites_used, satellites_visible;
    char device[128];
} cgps_report;

/// gps_open into a heap-allocated gps_data_t (Swift must not hold the 24 KB struct by value).
/// Returns NULL on failure with *error set to gps_open's errno-style code.
static inline struct gps_data_t *_Nullable cgps_open(const char *_Nonnull host, const char *_Nonnull port, int *_Nonnull error) {
    struct gps_data_t *data = calloc(1, sizeof(struct gps_data_t));
    if (data == NULL) { *error = -1; return NULL; }
    int result = gps_open(host, port, data);
    if (result != 0) { *error = errno != 0 ? errno : result; free(data); return NULL; }
    *error = 0;
    return data;
}

/// WATCH for JSON reports, from one device when `device` is given: gps_stream's third argument
/// is a void * that Swift cannot pass a string through cleanly.
static inline int cgps_watch(struct gps_data_t *_Nonnull data, const char *_Nullable device) {
    unsigned int flags = WATCH_ENABLE | WATCH_JSON;
    if (device != NULL) flags |= WATCH_DEVICE;
    return gps_stream(data, flags, (void *)device);
}

/// Waits up to `timeout_us` microseconds for a message.
static inline bool cgps_waiting(const struct gps_data_t *_Nonnull data, int timeout_us) {
    return gps_waiting(data, timeout_us);
}

/// Reads one message: clears `set` first, calls gps_read (its signature changed at API 7),
/// classifies it by the JSON class, and flattens what Swift needs. Returns gps_read's result
/// (-1 on EOF or error, 0 for a partial line).
static inline int cgps_read(struct gps_data_t *_Nonnull data, cgps_report *_Nonnull out) {
    data->set = 0;
#if GPSD_API_MAJOR_VERSION >= 7
    int result = gps_read(data, NULL, 0);
#else
    int result = gps_read(data);
#endif
    memset(out, 0, sizeof(*out));
    if (result <= 0) return result;
    gps_mask_t set = data->set;
    out->has_tpv = (set & MODE_SET) != 0;
    out->has_sky = (set & SATELLITE_SET) != 0;
    out->report_class = CGPS_OTHER;
    if (set & MODE_SET) out->report_class = CGPS_TPV;
    else if (set & SATELLITE_SET) out->report_class = CGPS_SKY;
    else if (set & VERSION_SET) out->report_class = CGPS_VERSION;
    else if (set & POLICY_SET) out->report_class = CGPS_WATCH;
    else if (set & (DEVICE_SET | DEVICELIST_SET)) out->report_class = CGPS_DEVICE;
    else if (set & ERROR_SET) out->report_class = CGPS_ERROR;
    struct gps_fix_t *fix = &data->fix;
    out->mode = fix->mode;
#if GPSD_API_MAJOR_VERSION >= 10
    out->status = fix->status;
#else
    out->status = data->status;
#endif
    // A TPV read does not set TIME_SET in libgps 3.22 (the SKY that follows does); the TPV parser
    // resets fix.time, so a zero time means the TPV had none.
#if GPSD_API_MAJOR_VERSION >= 9
    out->has_time = fix->time.tv_sec != 0;
    out->time_seconds = (int64_t)fix->time.tv_sec;
    out->time_nanoseconds = (int64_t)fix->time.tv_nsec;
#else
    out->has_time = fix->time != 0;
    out->time_seconds = (int64_t)floor(fix->time);
    out->time_nanoseconds = (int64_t)llround((fix->time - floor(fix->time)) * 1e9);
#endif
    out->latitude = fix->latitude;
    out->longitude = fix->longitude;
    out->alt_hae = fix->altHAE;
    out->alt_msl = fix->altMSL;
    out->eph = fix->eph;
    out->epx = fix->epx;
    out->epy = fix->epy;
    out->epv = fix->epv;
    out->speed = fix->speed;
    out->track = fix->track;
    out->climb = fix->climb;
    out->satellites_used = data->satellites_used;
    out->satellites_visible = data->satellites_visible;
    strncpy(out->device, data->dev.path, sizeof(out->device) - 1);
    return result;
}

/// The devices gpsd's last DEVICES message listed: `devices.list` is an array of structs of
/// fixed char arrays, which Swift imports as tuples. Copies entry `index`'s path and driver
/// (NUL-terminated, cut to the buffers) and returns how many devices there are.
static inline int cgps_device(const struct gps_data_t *_Nonnull data, int index, char *_Nonnull path, size_t path_size,
                              char *_Nonnull driver, size_t driver_size) {
    int count = data->devices.ndevices;
    if (count < 0) count = 0;
    if (count > MAXUSERDEVS) count = MAXUSERDEVS;
    if (index >= 0 && index < count && path_size > 0 && driver_size > 0) {
        snprintf(path, path_size, "%s", data->devices.list[index].path);
        snprintf(driver, driver_size, "%s", data->devices.list[index].driver);
    }
    return count;
}

/// Stops watching, closes the socket and frees the heap struct.
static inline void cgps_close(struct gps_data_t *_Nonnull data) {
    (void)gps_stream(data, WATCH_DISABLE, NULL);
    (void)gps_close(data);
    free(data);
}

#endif
