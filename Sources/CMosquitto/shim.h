#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H

// libmosquitto 2.0 (Debian libmosquitto-dev) for Swift. Swift imports mosquitto.h directly; the
// one helper below exists because of what Swift cannot do with it.
#include <mosquitto.h>
#include <mqtt_protocol.h>

/// mosquitto_property_add_int32 takes the list by `mosquitto_property **`, a pointer to an
/// opaque struct pointer that Swift imports awkwardly: adds MQTT 5's Session Expiry Interval to
/// `*list` (creating it), so a collector's session outlives a dropped connection.
static inline int cmosquitto_add_session_expiry(mosquitto_property *_Nullable *_Nonnull list, uint32_t seconds) {
    return mosquitto_property_add_int32(list, MQTT_PROP_SESSION_EXPIRY_INTERVAL, seconds);
}

#endif
