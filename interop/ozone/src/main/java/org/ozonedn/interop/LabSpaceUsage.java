package org.ozonedn.interop;

import java.io.File;
import java.time.Duration;
import org.apache.hadoop.hdds.fs.SpaceUsageCheckFactory;
import org.apache.hadoop.hdds.fs.SpaceUsageCheckParams;
import org.apache.hadoop.hdds.fs.SpaceUsagePersistence;
import org.apache.hadoop.hdds.fs.SpaceUsageSource;

/**
 * The lab DataNode's volumes report a fixed 512 GiB, all of it free, as Ozone's own
 * {@code MockSpaceUsageCheckFactory.HalfTera} does for MiniOzoneCluster tests
 * ({@code hdds.datanode.du.factory.classname}).
 *
 * <p>Why: a DataNode reserves a container's full size of its volume for every open container and
 * refuses a new one ("No volumes have enough space for a new container") once the reservations
 * reach the disk's real free space. The conformance suite opens about 300 containers of 64 MB,
 * about 19 GB of reservations, which a build machine's disk does not always have free. No
 * scenario depends on the volume's size (none tests a full disk), and the data written is small
 * and still goes to the real disk.
 */
public final class LabSpaceUsage implements SpaceUsageCheckFactory {
  private static final long SIZE = 512L * 1024 * 1024 * 1024;

  @Override
  public SpaceUsageCheckParams paramsFor(File dir) {
    return new SpaceUsageCheckParams(dir, new SpaceUsageSource.Fixed(SIZE, SIZE, 0),
        Duration.ZERO, SpaceUsagePersistence.None.INSTANCE);
  }
}
