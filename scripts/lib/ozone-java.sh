# Sourced by the scripts that run Ozone's Java code from interop/ozone (real-datanode.sh,
# java-client-check.sh): the JVM flags Ozone needs on Java 17, in one place.

# ozone_jvm_flags HEAP: sets the array `jvm` to the flags, with HEAP as the maximum heap (`default`:
# no -Xmx, the JVM's own default of a quarter of the machine's memory, which is what Ozone's
# launcher gives a daemon when OZONE_HEAPSIZE_MAX is unset). What Ozone's own launcher sets:
# reflective access for Netty's direct buffers and Hadoop's and RocksDB's helpers, a headless
# JVM, and the harness's log configuration (warnings to stderr).
ozone_jvm_flags() {
    local max=(-Xmx"$1")
    [ "$1" != default ] || max=()
    jvm=(
        "${max[@]}" -XX:+UseG1GC -Djava.awt.headless=true
        -Dio.netty.tryReflectionSetAccessible=true
        --add-opens java.base/java.lang=ALL-UNNAMED
        --add-opens java.base/java.nio=ALL-UNNAMED
        --add-opens java.base/sun.nio.ch=ALL-UNNAMED
        --add-opens java.base/java.util=ALL-UNNAMED
        --add-opens java.base/java.lang.reflect=ALL-UNNAMED
        --add-exports java.base/sun.nio.ch=ALL-UNNAMED
        -Dlog4j2.level=WARN -Dlog4j.configuration=real-datanode-log4j.properties
    )
}
