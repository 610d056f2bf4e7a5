/* libudev for the statically linked launcher, which Debian's static hwloc
 * (libhwloc.a) needs but whose static library Debian does not ship:
 * udev_new() finds no udev, as on a host without it, and hwloc reads sysfs
 * alone. hwloc asks udev only for names of the OS devices (disks, network
 * interfaces) of a topology with I/O, which qemu-pin filters out; the full
 * program links the real libudev through the shared hwloc. */
#include <stddef.h>

struct udev;
struct udev_device;

struct udev *udev_new(void);
struct udev *udev_unref(struct udev *udev);
struct udev_device *udev_device_new_from_subsystem_sysname(
    struct udev *udev, const char *subsystem, const char *sysname);
struct udev_device *udev_device_unref(struct udev_device *device);
const char *udev_device_get_property_value(struct udev_device *device,
                                           const char *key);

struct udev *
udev_new(void)
{
  return NULL;
}

struct udev *
udev_unref(struct udev *udev)
{
  (void)udev;
  return NULL;
}

struct udev_device *
udev_device_new_from_subsystem_sysname(struct udev *udev, const char *subsystem,
                                       const char *sysname)
{
  (void)udev;
  (void)subsystem;
  (void)sysname;
  return NULL;
}

struct udev_device *
udev_device_unref(struct udev_device *device)
{
  (void)device;
  return NULL;
}

const char *
udev_device_get_property_value(struct udev_device *device, const char *key)
{
  (void)device;
  (void)key;
  return NULL;
}
