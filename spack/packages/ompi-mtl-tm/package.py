# Spack recipe for ompi-mtl-tm, kept in the tree it builds:
#
#   spack repo add /path/to/ompi-mtl-tm/spack
#   spack install ompi-mtl-tm
#   spack load ompi-mtl-tm      # then: mpirun --mca pml cm --mca mtl tm ...
#
# The component goes into this package's own prefix (lib/openmpi), not
# into Open MPI's; loading the package appends that directory to Open
# MPI's component path after Open MPI's own (SYS_DEFAULT), so nothing else
# is needed to use it.
#
# The component reads Open MPI's internal structures, so it needs Open
# MPI's devel headers: a distribution's Open MPI as an external (Debian's
# libopenmpi-dev has them), or an Open MPI configured with
# --with-devel-headers.  Spack's own openmpi package does not install them;
# for that one, build this tree by hand with configure --with-ompi=PREFIX
# --with-ompi-source=DIR, DIR the tree Open MPI was built in (README,
# "Installing on a cluster").

import os

from spack.package import *

# spack/packages/ompi-mtl-tm/ -> the top of the tree
_TREE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# Open MPI's component path, as an environment variable
_COMPONENT_PATH = "OMPI_MCA_mca_base_component_path"


class OmpiMtlTm(AutotoolsPackage):
    """Open MPI point-to-point transport ("mpirun --mca pml cm --mca mtl
    tm") that hands MPI tag matching to the network card (rdma-core's
    TM-SRQ verbs, mlx5), with a built-in soft HCA over shared memory used
    when no such card is present."""

    homepage = "file://" + _TREE
    # The git repository this recipe lives in (no release is published).
    git = "file://" + _TREE

    version("main", branch="main")

    depends_on("openmpi@4.1:5.0")
    depends_on("pmix", when="^openmpi@5:")
    depends_on("rdma-core")
    depends_on("hwloc@2:")
    depends_on("ucx")
    depends_on("pkgconfig", type="build")
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("m4", type="build")

    def autoreconf(self, spec, prefix):
        Executable("./autogen.sh")()

    @property
    def component_dir(self):
        return join_path(self.prefix.lib, "openmpi")

    def configure_args(self):
        ompi = self.spec["openmpi"].prefix
        # where its wrapper says its headers are (Debian: not in /usr/include)
        mpicc = Executable(join_path(ompi.bin, "mpicc"))
        incdirs = mpicc("--showme:incdirs", output=str).split()
        if not any(
            os.path.exists(join_path(d, sub, "ompi_config.h"))
            for d in incdirs
            for sub in ("", "openmpi")
        ):
            raise InstallError(
                f"the openmpi in {ompi} has no devel headers (no ompi_config.h in "
                f"{' '.join(incdirs)}): use an Open MPI configured --with-devel-headers, "
                "or a distribution's as an external (Debian: libopenmpi-dev)"
            )
        return [f"--with-ompi={ompi}", f"--with-ompi-pkglibdir={self.component_dir}"]

    def setup_run_environment(self, env):
        # Open MPI's own directory first (SYS_DEFAULT): its components keep
        # loading, and a component of the same name there wins.
        #
        # Spack unloads by reversing what this returns when called again
        # (a set is unset, an appended entry removed).  Removing both
        # entries from a path that held only them would leave it empty,
        # which hides every component (mpirun then rejects its own
        # options): when nothing else is on the path, set it instead.
        ours = ("SYS_DEFAULT", self.component_dir)
        current = [p for p in os.environ.get(_COMPONENT_PATH, "").split(os.pathsep) if p]
        if [p for p in current if p not in ours]:
            for p in ours:
                env.append_path(_COMPONENT_PATH, p)
            env.prune_duplicate_paths(_COMPONENT_PATH)
        else:
            env.set(_COMPONENT_PATH, os.pathsep.join(ours))

    @run_after("install")
    def check_installed(self):
        so = join_path(self.component_dir, "mca_mtl_tm.so")
        if not os.path.isfile(so):
            raise InstallError(f"make install left no {so}")
