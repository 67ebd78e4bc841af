/*
 * fw_env.h — task environments: the read-only directory tree a
 * repository's tests need beside the system (a virtualenv, a prefix such
 * as a toolchain or a node_modules folder, or an unpacked OCI image
 * rootfs), kept in an env store and named by a content id.
 *
 * The id of a tree is its git tree id (40 hex digits of SHA-1): regular
 * files as blobs (mode 100755 when the owner may execute them, else
 * 100644), symbolic links as links, directories as trees, empty
 * directories left out — what `git add -Af && git write-tree` names the
 * same files.  So the same tree has the same id on every machine, and a
 * task record names its environment by it (`task.env`).
 *
 * An env store is a directory holding one subdirectory per environment,
 * named by its id, with the tree's files in it (no write bits on files);
 * an environment appears there whole (it is copied beside and renamed)
 * or not at all.  `recipes/` maps the blob id of a repository's
 * flywheel.env recipe to the environment built from it.
 *
 * The kind of an environment follows from its files: a tree with
 * pyvenv.cfg at the top is a venv; one with etc/ and usr/ directories and
 * a shell at bin/sh or usr/bin/sh is a rootfs; any other is a prefix.  In
 * the clean room a venv or prefix is bound read-only at FW_ENV_DIR, with
 * PATH starting at FW_ENV_DIR/bin and, for a venv, VIRTUAL_ENV set; a
 * rootfs replaces the system directories as the sandbox's root.
 */
#ifndef FW_ENV_H
#define FW_ENV_H

#include <stddef.h>

struct fw_sandbox_opts;

/* Where a venv or prefix appears inside the clean room (read-only). */
#define FW_ENV_DIR "/env"
/* Bytes of an id with its NUL. */
#define FW_ENV_ID_LEN 41
/* The recipe file at the top of a repository. */
#define FW_ENV_RECIPE "flywheel.env"
/* The environment variable naming the env store. */
#define FW_ENV_STORE_VAR "FW_ENV_STORE"
/* Most variables an environment sets in the clean room. */
#define FW_ENV_MAXVARS 8

enum fw_env_kind {
	FW_ENV_VENV = 0,
	FW_ENV_PREFIX,
	FW_ENV_ROOTFS,
};

/* "venv", "prefix", "rootfs"; never NULL. */
const char *fw_env_kind_name(enum fw_env_kind k);

/* The kind of the tree at dir (see above).  Cannot fail. */
enum fw_env_kind fw_env_kind_of(const char *dir);

/* 1 when s is an id: 40 lowercase hex digits. */
int fw_env_is_id(const char *s);

/*
 * The content id of the tree at dir into id.  Returns 0, or -1 with a
 * message in err (a file that cannot be read, a device, FIFO or socket in
 * the tree, which an environment cannot hold, a tree with no file).
 */
int fw_env_id(const char *dir, char id[FW_ENV_ID_LEN], char *err, size_t errlen);

/*
 * The env store to use into out (outlen bytes): opt when not NULL, else
 * $FW_ENV_STORE when set and not empty, else TASK_STORE/envs.  Returns 0,
 * or -1 with a message in err when none of them is given or the path is
 * too long.
 */
int fw_env_store_path(const char *opt, const char *task_store, char *out, size_t outlen,
		      char *err, size_t errlen);

/*
 * Copies the tree at dir into the env store (made when missing) under its
 * content id, unless the store holds that id already, and writes the id.
 * A new copy is hashed again, so that the id names what is stored.
 * Returns 0, or -1 with a message in err.
 */
int fw_env_add(const char *store, const char *dir, char id[FW_ENV_ID_LEN], char *err,
	       size_t errlen);

/*
 * The directory of environment id in store into path (pathlen bytes).
 * Returns 0, or -1 with a message in err that names the id and the store
 * when the store does not hold it.
 */
int fw_env_find(const char *store, const char *id, char *path, size_t pathlen, char *err,
		size_t errlen);

/*
 * Resolves what a user named with --env: an id (looked up in store) or a
 * directory (added to the store, unless it is one of the store's own).
 * Writes the id.  Returns 0, or -1 with a message in err.
 */
int fw_env_resolve(const char *store, const char *arg, char id[FW_ENV_ID_LEN], char *err,
		   size_t errlen);

/*
 * Records that the recipe whose git blob id is recipe (40 hex digits)
 * built environment id, and looks it up again.  fw_env_recipe_find
 * returns 1 with the id, 0 when the store has no environment of that
 * recipe, -1 on a read error (message in err).  fw_env_recipe_note
 * returns 0 or -1.
 */
/* The git blob id of the file at path (a recipe) into id.  Returns 0, or
 * -1 with a message in err. */
int fw_env_recipe_id(const char *path, char id[FW_ENV_ID_LEN], char *err, size_t errlen);

int fw_env_recipe_note(const char *store, const char *recipe, const char *id, char *err,
		       size_t errlen);
int fw_env_recipe_find(const char *store, const char *recipe, char id[FW_ENV_ID_LEN],
		       char *err, size_t errlen);

/*
 * An environment opened for the clean room.  Fill with fw_env_open();
 * it owns no memory (nothing to free).
 */
struct fw_env {
	char id[FW_ENV_ID_LEN];
	enum fw_env_kind kind;
	char dir[4096];                      /* the stored tree */
	char bind[4200];                     /* venv, prefix: "DIR:" FW_ENV_DIR */
	char vars[FW_ENV_MAXVARS][4300];     /* "NAME=VALUE" */
	int nvars;
};

/*
 * Finds id in store and works out how it is mounted: its kind, its bind,
 * the variables it sets (FW_ENV=/env; PATH with /env/bin and, where they
 * exist, /env/node_modules/.bin in front; VIRTUAL_ENV for a venv;
 * for a prefix LD_LIBRARY_PATH=/env/lib, NODE_PATH=/env/node_modules and
 * PYTHONPATH for /env/lib/python3.N/site-packages where those exist).
 * Returns 0, or -1 with fw_env_find's message in err.
 */
int fw_env_open(struct fw_env *e, const char *store, const char *id, char *err,
		size_t errlen);

/*
 * fw_env_open() for what a user named with --env: a directory, used where
 * it is (not stored, its id left empty), or an id looked up in store
 * (which may be NULL for a directory).  Returns 0, or -1 with a message
 * in err.
 */
int fw_env_open_arg(struct fw_env *e, const char *store, const char *arg, char *err,
		    size_t errlen);

/*
 * Points the sandbox options o at environment e (NULL: leaves o alone):
 * binds (room for nbinds pointers) receives o's read-only binds and then
 * e's, vars (room for nvars) o's environment and then e's, both
 * NULL-terminated; a rootfs sets o->root.  The arrays and e must outlive
 * the run.  Returns 0, or -1 when the arrays are too small.
 */
int fw_env_apply(const struct fw_env *e, struct fw_sandbox_opts *o, const char **binds,
		 size_t nbinds, const char **vars, size_t nvars);

/*
 * Unpacks the OCI image layout at layout (a directory with oci-layout,
 * index.json and blobs/sha256/) into dir, made here and not there
 * before: the image manifest of index.json (through a nested index, the
 * entry for linux on this machine's architecture), its layers (tar, or
 * tar+gzip) applied in order, with whiteouts (.wh.NAME removes NAME of
 * lower layers, .wh..wh..opq empties a directory of them).  Each blob's
 * size and sha256 digest are checked against its descriptor; a member
 * whose path has a ".." or goes through a symbolic link is refused;
 * device nodes and FIFOs are not kept, nor set-ID and sticky bits, nor
 * owners.  Returns 0, or -1 with a message in err naming the file or the
 * layer (from 1) and member; dir may then hold part of the image.
 */
int fw_env_oci_unpack(const char *layout, const char *dir, char *err, size_t errlen);

#endif
