// What Ozone's client itself pays per chunk for its checksums: the throughput of the real
// org.apache.hadoop.ozone.common.Checksum.computeChecksum(ByteBuffer) of the Ozone release on the
// classpath (interop/ozone/setup.sh builds it), CRC32 and CRC32C over 16 KiB windows, for
// comparison with common::checksum's Checksum::compute (common/examples/checksum_bench.rs):
// both build the chunk's whole ChecksumData (Ozone: a List<ByteString>, one per window; ours: one
// Bytes per window), where ChecksumBench.java measures the bare java.util.zip loop.
//
// Same buffer (same pseudo-random bytes, a direct ByteBuffer --align bytes past a 64-byte
// boundary), same timing (about --seconds per figure after a --warmup JIT warm-up), same RESULT
// lines as ChecksumBench.java, with impl=ozone. The last window's checksum must agree with every
// other implementation's.
//
// Run (Java 11+ source launcher, with the harness's classpath):
//   java -cp "$(cat interop/ozone/target/classpath-2.2.0.txt)" scripts/java/OzoneChecksumBench.java \
//       [--seconds 1.5] [--warmup 2] [--buffer-kib 4096] [--window-kib 16] [--align 16]

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.ChecksumType;
import org.apache.hadoop.ozone.common.Checksum;
import org.apache.hadoop.ozone.common.ChecksumData;
import org.apache.hadoop.ozone.common.OzoneChecksumException;
import org.apache.ratis.thirdparty.com.google.protobuf.ByteString;

public class OzoneChecksumBench {
    static double seconds = 1.5;
    static double warmupSeconds = 2.0;
    static int bufferBytes = 4 << 20;
    static int windowBytes = 16 << 10;
    static int align = 16;

    /** Defeats dead-code elimination. */
    static volatile int sink;

    public static void main(String[] args) throws OzoneChecksumException {
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (i + 1 >= args.length) {
                usage(flag + " needs a value");
            }
            String value = args[++i];
            switch (flag) {
                case "--seconds": seconds = Double.parseDouble(value); break;
                case "--warmup": warmupSeconds = Double.parseDouble(value); break;
                case "--buffer-mib": bufferBytes = Integer.parseInt(value) << 20; break;
                case "--buffer-kib": bufferBytes = Integer.parseInt(value) << 10; break;
                case "--window-kib": windowBytes = Integer.parseInt(value) << 10; break;
                case "--align": align = Integer.parseInt(value); break;
                default: usage("unknown argument " + flag);
            }
        }
        if (!(seconds > 0) || warmupSeconds < 0 || bufferBytes <= 0 || windowBytes <= 0) {
            usage("--seconds, the buffer size and --window-kib must be positive");
        }
        if (align < 0 || align >= 64) {
            usage("--align must be 0..63");
        }
        byte[] heap = new byte[bufferBytes];
        fill(heap);
        ByteBuffer direct = ByteBuffer.allocateDirect(bufferBytes + 128).alignedSlice(64);
        direct.position(align).limit(align + bufferBytes);
        direct = direct.slice();
        direct.put(heap).clear();
        String version = Checksum.class.getPackage().getImplementationVersion();
        System.out.printf("Ozone %s Checksum.computeChecksum(ByteBuffer) throughput on Java %s: %d-byte windows over a "
                + "%d-byte direct ByteBuffer %d bytes past a 64-byte boundary, ~%s s per figure after %s s warm-up%n",
                version == null ? "(unknown version)" : version, System.getProperty("java.version"), windowBytes,
                bufferBytes, align, seconds, warmupSeconds);
        run("CRC32", ChecksumType.CRC32, direct);
        run("CRC32C", ChecksumType.CRC32C, direct);
    }

    static void usage(String message) {
        System.err.println(message);
        System.err.println("usage: java -cp CLASSPATH OzoneChecksumBench.java [--seconds S] [--warmup S] [--buffer-mib N | --buffer-kib N] [--window-kib K] [--align A]");
        System.exit(2);
    }

    /** Same generator as checksum_bench.rs and ChecksumBench.java. */
    static void fill(byte[] buf) {
        long x = 0x0123456789abcdefL;
        for (int i = 0; i < buf.length; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            buf[i] = (byte) (x >>> 56);
        }
    }

    /** One chunk's ChecksumData, as BlockOutputStream has it computed; returns the last CRC. */
    static int pass(Checksum checksum, ByteBuffer data) throws OzoneChecksumException {
        ChecksumData cd = checksum.computeChecksum(data.duplicate());
        List<ByteString> sums = cd.getChecksums();
        return sums.get(sums.size() - 1).asReadOnlyByteBuffer().getInt();
    }

    static void run(String name, ChecksumType type, ByteBuffer data) throws OzoneChecksumException {
        // allowChecksumCache false: the cache serves a chunk computed again as it grows, not this.
        Checksum checksum = new Checksum(type, windowBytes, false);
        long warmEnd = System.nanoTime() + (long) (warmupSeconds * 1e9);
        while (System.nanoTime() < warmEnd) {
            sink = pass(checksum, data);
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        boolean cpuTime = threads.isCurrentThreadCpuTimeSupported();
        long budget = (long) (seconds * 1e9);
        long cpuStart = cpuTime ? threads.getCurrentThreadCpuTime() : 0;
        long start = System.nanoTime();
        long passes = 1;
        int last = pass(checksum, data);
        while (System.nanoTime() - start < budget) {
            last = pass(checksum, data);
            passes++;
        }
        double secs = (System.nanoTime() - start) / 1e9;
        double cpuSecs = cpuTime ? (threads.getCurrentThreadCpuTime() - cpuStart) / 1e9 : 0;
        sink = last;
        long bytes = passes * (long) bufferBytes;
        double gbps = bytes / secs / 1e9;
        String cpuGbps = cpuSecs > 0 ? String.format("%.3f", bytes / cpuSecs / 1e9) : "n/a";
        System.out.printf("%-7s %-10s %7.2f GB/s wall, %7s GB/s per CPU-second   last window checksum 0x%08x%n",
                name, "ozone", gbps, cpuSecs > 0 ? String.format("%.2f", bytes / cpuSecs / 1e9) : "n/a", last);
        System.out.printf("RESULT impl=ozone algo=%s buffer=%d align=%d gbps=%.3f cpu_gbps=%s last=0x%08x bytes=%d secs=%.3f uses=org.apache.hadoop.ozone.common.Checksum%n",
                name, bufferBytes, align, gbps, cpuGbps, last, bytes, secs);
    }
}
